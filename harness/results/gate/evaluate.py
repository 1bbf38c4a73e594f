"""How to gate (`GateOptions`), the verdict (`GateResult`), and matching a run's speculative cells to
a baseline's and checking each (pure: no I/O; docs/gate.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import BadInput
from harness.results import slo_view
from harness.results.checks import Check
from harness.results.gate.cell_checks import (
    cell_floors,
    check_cell,
    lossless_check,
    sampling_check,
    segment_checks,
    with_power,
)
from harness.results.gate.crossover_checks import crossover_checks
from harness.results.gate.paired import Verdict, overall_verdict
from harness.results.runs import Run, describe_setting
from harness.schema import CellRow, Setting, comparability_diffs
from harness.schema_baseline import BaselineFile

if TYPE_CHECKING:
    from harness.recipe import GateSection
    from harness.results.gate.paired_run import PairedCell

DEFAULT_TOLERANCE = 0.05
DEFAULT_LOSSLESS = "no-spec-bug"


@dataclass(frozen=True)
class GateOptions:
    """How to gate (the CLI's `harness gate` options, the recipe's `gate:` section). None means
    "the baseline's own, else the default" (docs/gate.md, "Precedence")."""

    tolerance: float | None = None  # allowed relative AL drop; None: the baseline's (else 0.05)
    min_speedup: float | None = None  # also check speedup >= this
    noise_aware: bool = False  # compare the upper end of the CI
    floors: tuple[float, ...] | None = None  # per-position floors for every cell
    allow_missing: bool = False  # gate what matches, list the rest
    draft: str | None = None  # the run's draft label to gate when it has several
    lossless: str | None = None  # T = 0 requirement; None: the baseline's, else "no-spec-bug"
    max_crossover_drop: float | None = None  # None: the baseline's requirement, if any
    sampling_p_floor: float | None = None  # None: the baseline's, if any
    min_slo_rate_ratio: float | None = None  # open-loop cells: SLO rate ratio >= this
    strict_power: bool = False  # a power warning is unusable input (applied by the caller: the CLI)
    baseline_draft: str | None = None  # the run's label of the baseline's draft: the paired gate

    def __post_init__(self):
        if self.floors is not None and not isinstance(self.floors, tuple):
            object.__setattr__(self, "floors", tuple(self.floors))

    @classmethod
    def from_recipe(cls, section: GateSection, draft: str | None = None) -> GateOptions:
        """The recipe's gate section (recipe.gate), gating the run's `draft` label."""
        return cls(
            tolerance=section.tolerance,
            min_speedup=section.min_speedup,
            noise_aware=section.noise_aware,
            draft=draft,
            lossless=section.lossless,
            max_crossover_drop=section.max_crossover_drop,
            sampling_p_floor=section.sampling_p_floor,
            min_slo_rate_ratio=section.min_slo_rate_ratio,
            baseline_draft="baseline_draft" if section.baseline_draft else None,
        )


@dataclass(frozen=True)
class GateResult:
    run_id: str
    baseline: str
    tolerance: float
    noise_aware: bool
    min_speedup: float | None
    floors_source: str
    checks: tuple[Check, ...]
    not_gated: tuple[str, ...] = ()  # baseline cells left out (allow_missing), with why
    extra: tuple[str, ...] = ()  # run cells the baseline does not have
    incomplete: str | None = None  # what a killed run lacks
    max_crossover_drop: float | None = None
    paired: tuple[PairedCell, ...] = ()  # the paired gate's cells (docs/gate.md, "Paired gate")
    # "paired" (the baseline's draft in this run), "stored" (numbers) or "canary" (the same draft on a
    # reference engine: harness/results/gate/canary_gate.py)
    baseline_kind: str = "stored"
    baseline_draft_hash: str | None = None

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def verdict(self) -> Verdict:
        """pass / fail / inconclusive: a failed check or paired cell fails; an unsettled paired cell
        is inconclusive (a stored-number gate reads pass or fail)."""
        if self.failures:
            return "fail"
        if self.paired:
            return overall_verdict(c.verdict for c in self.paired)
        # stored numbers: a pass the test could not have failed at the tolerance (a power warning) settles nothing
        return "inconclusive" if self.power_warnings else "pass"

    @property
    def detectable_drop(self) -> float | None:
        """The largest AL drop the gated cells can see at 80 % power: the paired cells' when there
        are any, else the stored-number AL checks' (None: neither)."""
        mdds = [c.estimates[0].mdd for c in self.paired if c.estimates]
        mdds = mdds or [c.min_detectable_drop for c in self.checks if c.min_detectable_drop is not None]
        return max(mdds) if mdds else None

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    @property
    def power_warnings(self) -> list[str]:
        return [f"{c.where}: {c.power_warning}" for c in self.checks if c.power_warning]

    def summary(self) -> str:
        cells = len({c.where for c in self.checks})
        if self.paired:
            return self._paired_summary()
        if not self.failures and self.verdict == "inconclusive":
            return (
                f"gate inconclusive: {len(self.checks)} checks on {cells} cells of {self.run_id} vs {self.baseline} "
                f"passed, but the test sees an AL drop of {self.detectable_drop:.1%} at 80 % power, the tolerance "
                f"is {self.tolerance:.1%} (stored-number baseline; a baseline draft run beside the candidate, "
                "gate.baseline_draft, is the paired test)"
            )
        if not self.failures:
            return f"gate passed: {len(self.checks)} checks on {cells} cells of {self.run_id} vs {self.baseline}"
        first = self.failures[0].message()
        more = f" (+{len(self.failures) - 1} more)" if len(self.failures) > 1 else ""
        failed = "changed or failed" if self.baseline_kind == "canary" else "below bound"
        return f"gate failed: {len(self.failures)} of {len(self.checks)} checks {failed}: {first}{more}"

    def _paired_summary(self) -> str:
        mdd = self.detectable_drop
        sees = f"detectable AL drop {mdd:.1%} at 80 % power" if mdd is not None else "no detectable drop"
        tested = sum(len(c.estimates) > 0 for c in self.paired)
        head = f"gate {self.verdict} (paired against the baseline's draft on {tested} cells): "
        head += f"tolerance {self.tolerance:.1%}, {sees}"
        if self.failures:
            head += f"; {len(self.failures)} of {len(self.checks)} other checks failed: {self.failures[0].message()}"
        return head


def cells_for_run_verifiers(baseline: BaselineFile, rows: list[CellRow]) -> BaselineFile:
    """A baseline may hold cells for several verifiers (one set per verifier hash: e.g. the CPU
    stand-in pretrained in bf16 where the CPU computes it natively and in float32 where it does
    not, harness/hardware.py). The run is gated against the cells of its own verifiers; a baseline
    with none of them is left whole, so the mismatch is reported as today."""
    mine = {r.verifier_hash for r in rows}
    ours = [c for c in baseline.cells if c.verifier_hash in mine]
    return baseline.model_copy(update={"cells": ours}) if ours and len(ours) < len(baseline.cells) else baseline


@dataclass(frozen=True)
class CellRules:
    floors: Sequence[float] | None
    use_stored_floors: bool
    noise_aware: bool
    min_speedup: float | None
    lossless: str
    sampling_p_floor: float | None = None


def _cell_checks(
    run: Run, baseline: BaselineFile, by_setting: dict[Setting, list[CellRow]], tol: float, rules: CellRules
) -> tuple[list[Check], list[str]]:
    """Each baseline cell matched to the run's row at its setting and checked; what cannot be
    matched or compared is a problem."""
    checks: list[Check] = []
    problems: list[str] = []
    for base in baseline.cells:
        key = base.setting
        where, matched = describe_setting(key), by_setting.get(key, [])
        if len(matched) > 1:
            raise BadInput(
                f"run {run.label} has several drafts at {where} "
                f"({', '.join(str(r.draft) for r in matched)}); pass --draft to choose one"
            )
        if not matched:
            problems.append(f"{where}: no finished speculative cell in run {run.label}")
            continue
        row = matched[0]
        diffs = [f"{col} {a} vs {b}" for col, a, b in comparability_diffs(base, row)]
        if diffs:
            problems.append(f"{where}: not comparable with the baseline ({'; '.join(diffs)})")
        elif not row.ok:
            problems.append(f"{where}: the run's cell failed ({row.error})")
        elif rules.min_speedup is not None and row.speedup is None:
            problems.append(f"{where}: no speedup measured (no baseline arm); drop --min-speedup or rerun")
        else:
            floors = cell_floors(base, tol, rules.floors, rules.use_stored_floors)
            checks += with_power(
                check_cell(base, row, tol, floors, rules.noise_aware, rules.min_speedup),
                base,
                row,
                tol,
                rules.noise_aware,
            )
            checks += segment_checks(base, row, tol, rules.use_stored_floors, rules.noise_aware)
            checks += [
                c
                for c in [lossless_check(base, row, rules.lossless), sampling_check(base, row, rules.sampling_p_floor)]
                if c is not None
            ]
    return checks, problems


def _floors_source(o: GateOptions, tol: float) -> str:
    if o.floors is not None:
        return "--floors"
    return "baseline.json per_position_floors" if o.tolerance is None else f"baseline rates × (1 − {tol:g})"


PAIRED_METRICS = ("acceptance_length", "per_position_rate")  # what the paired gate tests instead


def evaluate(
    run: Run,
    baseline: BaselineFile,
    baseline_name: str,
    options: GateOptions | None = None,
    paired: Sequence[PairedCell] = (),
) -> GateResult:
    """Match the run's speculative cells to the baseline's and check each (no I/O). With paired
    cells (the baseline's draft run beside the candidate) the stored AL, per-position and segment
    checks give way to them; the rest (lossless, speedup, crossover, SLO, T > 0) stay."""
    o = options or GateOptions()
    baseline = cells_for_run_verifiers(baseline, run.rows)
    stored_tol = DEFAULT_TOLERANCE if baseline.tolerance is None else baseline.tolerance
    tol = float(stored_tol) if o.tolerance is None else o.tolerance
    max_crossover_drop = baseline.max_crossover_drop if o.max_crossover_drop is None else o.max_crossover_drop
    rows = [r for r in run.rows if r.is_speculative]
    if o.draft is not None:
        labels = sorted({str(r.draft) for r in rows})
        rows = [r for r in rows if r.draft == o.draft]
        if not rows:
            raise BadInput(f"--draft {o.draft}: run {run.label} has no such draft; its drafts: {', '.join(labels)}")
    by_setting: dict[Setting, list[CellRow]] = {}
    for r in rows:
        by_setting.setdefault(r.setting, []).append(r)
    checks, problems = _cell_checks(
        run,
        baseline,
        by_setting,
        tol,
        CellRules(
            o.floors,
            o.tolerance is None,
            o.noise_aware,
            o.min_speedup,
            o.lossless or baseline.lossless or DEFAULT_LOSSLESS,
            o.sampling_p_floor if o.sampling_p_floor is not None else baseline.sampling_p_floor,
        ),
    )
    if paired:
        checks = [c for c in checks if not c.metric.startswith(PAIRED_METRICS)]
    if max_crossover_drop is not None:
        load_checks, load_problems = crossover_checks(
            baseline.crossovers, rows, float(max_crossover_drop), o.noise_aware
        )
        checks += load_checks
        problems += load_problems
    if o.min_slo_rate_ratio is not None:
        slo_checks, slo_problems = slo_view.slo_ratio_checks(run, o.min_slo_rate_ratio, o.noise_aware)
        checks += slo_checks
        problems += slo_problems
    if problems and not o.allow_missing:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        killed = (
            (
                f"; run {run.label} is {run.status} with {len(run.missing)} planned cells missing "
                "(finish it with --resume)"
            )
            if run.missing
            else ""
        )
        raise BadInput(
            f"unusable gate input: {problems[0]}{more}{killed}; pass --allow-missing to gate only the cells that match"
        )
    if not checks and not paired:
        raise BadInput(
            f"nothing to gate: no cell of run {run.label} matches baseline {baseline_name}"
            + (f" ({problems[0]})" if problems else "")
        )
    base_keys = {base.setting for base in baseline.cells}
    extra = tuple(describe_setting(k) for k in by_setting if k not in base_keys)
    return GateResult(
        run.label,
        baseline_name,
        tol,
        o.noise_aware,
        o.min_speedup,
        _floors_source(o, tol),
        tuple(checks),
        tuple(problems),
        extra,
        run.incomplete_note(),
        max_crossover_drop,
        tuple(paired),
        "paired" if paired else "stored",
    )
