"""The checks of one run cell matched to its baseline cell (pure; docs/gate.md, "Checks"): AL and
per-position rates against their floors (noise-aware: plus the CI half-widths in quadrature), AL per
thinking/answer segment, speedup, lossless at T = 0, the T > 0 distribution test, and beside the AL
check the smallest drop the cell's prompts can detect (power).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness.analysis import power as pw
from harness.results.checks import Check
from harness.schema import CellRow, GatedCell
from harness.schema_baseline import BaselineCell
from harness.ui import fmt


def cell_floors(base: BaselineCell, tolerance: float, floors: Sequence[float] | None, use_stored: bool) -> list[float]:
    if floors is not None:
        return list(floors)
    if use_stored and base.per_position_floors is not None:
        return list(base.per_position_floors)
    return [x * (1 - tolerance) for x in base.per_position_rates or []]


def _check(base: GatedCell, row: CellRow, **fields: Any) -> Check:
    """A check of the run's `row` at the baseline cell's setting."""
    return Check(
        suite=base.suite,
        k=base.k,
        concurrency=base.concurrency,
        temperature=base.temperature,
        draft=str(row.draft),
        request_rate=float(base.request_rate or 0.0),
        **fields,
    )


def noise_slack(
    value: float | None, ci_high: float | None, base_value: float | None, base_ci_high: float | None
) -> float:
    """What the noise-aware gate adds to a value before comparing it with its bound: the run's CI
    half-width and the baseline's in quadrature (pure); 0 without the run's CI."""
    if value is None or ci_high is None:
        return 0.0
    base_half = base_ci_high - base_value if base_value is not None and base_ci_high is not None else 0.0
    return float(math.hypot(ci_high - value, base_half))


def check_cell(
    base: GatedCell,
    row: CellRow,
    tolerance: float,
    floors: list[float],
    noise_aware: bool = False,
    min_speedup: float | None = None,
) -> list[Check]:
    """The checks of one matched cell (pure)."""
    al = row.acceptance_length
    slack = noise_slack(al, row.al_ci_high, base.acceptance_length, base.al_ci_high) if noise_aware else 0.0
    rates = row.per_position_rates or []
    base_rates = base.per_position_rates or []

    def mk(metric: str, baseline: float | None, value: float | None, bound: float, extra: float = 0.0) -> Check:
        compared = None if value is None else value + extra
        return _check(
            base,
            row,
            metric=metric,
            baseline=baseline,
            value=value,
            bound=bound,
            passed=compared is not None and compared >= bound,
            compared=compared,
        )

    base_al = float(base.acceptance_length or 0.0)  # a baseline cell has an AL (baseline_cells)
    checks = [mk("acceptance_length", base.acceptance_length, al, base_al * (1 - tolerance), slack)]
    for i, floor in enumerate(floors):
        checks.append(
            mk(
                f"per_position_rate[{i + 1}]",
                base_rates[i] if i < len(base_rates) else None,
                rates[i] if i < len(rates) else None,
                floor,
                slack,
            )
        )
    if min_speedup is not None:
        checks.append(_unsteady(mk("speedup", base.speedup, row.speedup, min_speedup), row))
    return checks


def _unsteady(check: Check, row: CellRow) -> Check:
    """A speedup measured while the machine's speed moved (its MACHINE NOISE flag) never passes a
    floor, whatever it reads: load can fake a speedup (harness/analysis/machine.py)."""
    from harness.analysis.machine import noise_flag

    noisy = noise_flag(row.flags)
    if noisy is None:
        return check
    return replace(
        check,
        passed=False,
        detail=f"{fmt(check.value)}x was measured on an unsteady machine "
        f"({noisy.split(';')[0]}); a flagged speedup cannot pass a floor: rerun on a quiet machine",
    )


def segment_floors(base: GatedCell, tolerance: float) -> dict[str, float]:
    return {b.label: b.al * (1 - tolerance) for b in base.breakdowns.segment.measured()}


def segment_checks(
    base: BaselineCell, row: CellRow, tolerance: float, use_stored: bool, noise_aware: bool = False
) -> list[Check]:
    """AL per thinking/answer segment against its floor: the baseline's stored `segment_floors`
    (pinned by hand, like per-position floors) unless a tolerance was given, else baseline
    segment AL × (1 − tolerance). A segment the run's outputs lack fails, saying so."""
    stored = base.segment_floors
    floors = stored if use_stored and stored is not None else segment_floors(base, tolerance)
    base_al = {b.label: b.al for b in base.breakdowns.segment.measured()}
    base_hi = {b.label: b.ci_high for b in base.breakdowns.segment.measured()}
    run_al = {b.label: b.al for b in row.breakdowns.segment.measured()}
    run_hi = {b.label: b.ci_high for b in row.breakdowns.segment.measured()}
    out = []
    for seg, floor in floors.items():
        value = run_al.get(seg)
        slack = noise_slack(value, run_hi.get(seg), base_al.get(seg), base_hi.get(seg)) if noise_aware else 0.0
        compared = None if value is None else value + slack
        passed = compared is not None and compared >= floor
        out.append(
            _check(
                base,
                row,
                metric=f"acceptance_length[{seg}]",
                baseline=base_al.get(seg),
                value=value,
                bound=floor,
                passed=passed,
                compared=compared,
                detail=None
                if value is not None
                else f"the run's outputs have no {seg} segment (baseline {fmt(base_al.get(seg))}, floor {fmt(floor)})",
            )
        )
    return out


def lossless_check(base: GatedCell, row: CellRow, requirement: str) -> Check | None:
    """A T = 0 cell's misses against the requirement; None when it has none (nothing to judge)
    or the requirement is "none"."""
    from harness.analysis.lossless import verdict_meets

    compared = int(row.lossless_compared or 0)
    misses = compared - int(row.lossless_matches or 0)
    if requirement == "none" or not compared or not misses or float(row.temperature or 0) > 0:
        return None
    verdict = row.lossless_verdict
    # the CLI checks --lossless against LOSSLESS_REQUIREMENTS; a baseline's value is taken as written
    passed = requirement != "exact" and verdict_meets(verdict, requirement)  # type: ignore[arg-type]
    return _check(
        base,
        row,
        metric=f"lossless ({requirement})",
        baseline=None,
        value=row.lossless_match_rate,
        bound=1.0,
        passed=passed,
        detail=f"{misses}/{compared} outputs differ from the baseline, worst {verdict or 'unclassified'} "
        f"({'meets' if passed else 'fails'} {requirement})",
    )


def sampling_check(base: GatedCell, row: CellRow, p_floor: float | None) -> Check | None:
    """A T > 0 cell's distribution test (harness/analysis/lossless_sampling.py) against a p-value
    floor; None at T = 0, without a floor, or when the cell has no test result."""
    p = row.sampling_p_value
    if p_floor is None or float(row.temperature or 0) == 0 or p is None:
        return None
    passed = p >= p_floor
    return _check(
        base,
        row,
        metric="T>0 sampling p-value",
        baseline=base.sampling_p_value,
        value=p,
        bound=p_floor,
        passed=passed,
        detail=f"p = {p:.3g} over {row.sampling_num_tokens} tokens, divergence TV "
        f"{fmt(row.sampling_tv)} ({'>=' if passed else '<'} floor {p_floor:g})",
    )


def _se(row: GatedCell) -> float | None:
    if row.al_se is not None:
        return float(row.al_se)
    lo, hi = row.al_ci_low, row.al_ci_high
    return pw.se_from_ci(lo, hi) if lo is not None and hi is not None else None


def _prompts(row: CellRow) -> int | None:
    if row.num_prompts:
        return int(row.num_prompts)
    n, reps = row.num_requests, row.repeats or 1
    return int(n) // int(reps) if n else None


def cell_power(base: GatedCell, row: CellRow, tolerance: float, noise_aware: bool) -> pw.Power | None:
    """What the cell's AL check can detect; None without an AL, an SE or a prompt count."""
    al, se, n = row.acceptance_length, _se(row), _prompts(row)
    if al is None or se is None or not n or tolerance <= 0:
        return None
    conf = pw.NOISE_AWARE_CONFIDENCE if noise_aware else pw.CONFIDENCE
    return pw.gate_power(al, se, n, tolerance, conf, baseline_se=_se(base) or 0.0)


def with_power(checks: list[Check], base: GatedCell, row: CellRow, tolerance: float, noise_aware: bool) -> list[Check]:
    p = cell_power(base, row, tolerance, noise_aware)
    if p is None:
        return checks
    return [
        replace(c, min_detectable_drop=p.min_detectable_drop, power_warning=p.warning())
        if c.metric == "acceptance_length"
        else c
        for c in checks
    ]
