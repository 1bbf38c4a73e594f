"""`harness gate`: hold a run's speculative cells against a stored baseline; exit 1 on regression.

Baseline folder, results/baselines/<name>/ (committed; what CI gates against):
  baseline.json  {"format": 1, "source_run_id", "created_at", "tolerance",
                  "cells": [{draft, method, suite, suite_version, suite_sha, k, concurrency,
                             temperature, max_tokens, verifier_hash, acceptance_length,
                             per_position_rates, al_ci_low, al_ci_high, speedup,
                             per_position_floors}, ...]}
                 one entry per speculative cell of the source run; per_position_floors are
                 per_position_rates × (1 − tolerance) when written — edit them by hand to pin
                 floors, as vLLM's CI does (tests/v1/spec_decode/test_acceptance_length.py).
                 "crossovers": the run's crossover concurrency per (draft, suite, k, T), and
                 "max_crossover_drop" when the baseline requires it not to move down.
  manifest.json  the manifest of the run the baseline came from (versions, hardware, hashes,
                 recipe). Written first; baseline.json last, and a folder whose two files name
                 different runs (an update killed midway) is refused.

Checks, per speculative cell of the run matched to a baseline cell on (suite, k, concurrency,
temperature, request rate) — the draft label may differ between runs:
  acceptance_length     >= baseline AL × (1 − tolerance)
  per_position_rate[i]  >= floor[i], i = 1..k (unconditional rates, harness/metrics.py)
  acceptance_length[s]  >= segment floor, s = thinking / answer when the baseline's outputs think
                        (harness/bench/breakdown.py; floors stored as segment_floors, like
                        per_position_floors)
  speedup               >= min_speedup (only when given)
  crossover concurrency >= baseline crossover × (1 − max_crossover_drop), per (suite, k, T), when
                        the baseline or the argument sets max_crossover_drop (harness/results/gate_load.py)
  SLO rate ratio        >= min_slo_rate_ratio, per open-loop line (bench.request_rate, bench.slo), when given:
                        the draft's highest rate within the SLO at p99 over its baseline's, from this run
                        alone (harness/analysis/slo.py; noise-aware: the ratio's CI upper end)
  lossless (T = 0)      the cell's worst miss meets the requirement (harness/analysis/lossless.py):
                        "exact" no miss · "numerics-only" every miss within engine noise ·
                        "no-spec-bug" (default) no miss with a large margin · "none" not checked
  T>0 sampling p-value  >= sampling_p_floor (argument or baseline.json), T > 0 cells with a
                        distribution test (harness/analysis/lossless_sampling.py)
The arguments ("flags") are one `GateOptions`: built from the CLI's options (harness/results/commands.py)
or from the recipe's gate section (`GateOptions.from_recipe`, the main job).
Precedence (flag > file > default): tolerance = the argument, else the baseline's; floors = the
argument, else the baseline's stored floors when no tolerance was given, else baseline
rates × (1 − tolerance).
Noise-aware: a value counts up to the upper end of its CI, widened by the baseline's own noise:
AL is compared as AL + slack, slack = hypot(al_ci_high − AL, baseline al_ci_high − baseline AL)
(per-request bootstrap half-widths; the baseline is an estimate from as few prompts as the run, and
power below already combines the two SEs the same way). Per-position rates get the same slack
(acceptance at position i implies it at every earlier position, so the positions are positively
correlated and SD(rate_i) <= SD(Σ rates) = SD(AL)); segment ALs their own segment half-widths.
Without the run's CI the point value is used.
Power (harness/analysis/power.py): beside each cell's AL check, the smallest relative AL drop the
cell can detect with its prompts (one-sided, 95 % confidence — 97.5 % when noise-aware — and 80 %
power); SE from the row's `al_se` (per-prompt counts), else from its AL CI, combined with the
baseline cell's SE when it has one. A cell whose detectable drop exceeds the tolerance is warned
about with the prompts it would need; `strict_power` makes that unusable input (exit 2).
Unusable input (BadInput, exit 2): a baseline cell without a finished, ok run cell; a matched
cell that differs in verifier_hash, max_tokens, suite_version or suite_sha. allow_missing gates
the rest and lists those.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace  # noqa: F401
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis import power as pw
from harness.errors import BadInput
from harness.results import gate_load, slo_view
from harness.results.checks import Check
from harness.results.runs import Run, describe_setting, fmt, is_speculative, read_run, setting
from harness.schema import (
    BASELINE_COLUMNS,  # noqa: F401
    BASELINE_FILE,
    BASELINE_FORMAT,
    MANIFEST_FILE,
    BaselineCell,
    BaselineFile,
    CellRow,
    GatedCell,
    Manifest,
    Setting,
    comparability_diffs,
)

if TYPE_CHECKING:
    from harness.recipe import GateSection

FORMAT = BASELINE_FORMAT
DEFAULT_TOLERANCE = 0.05
DEFAULT_LOSSLESS = "no-spec-bug"
BASELINE_FIELDS = BASELINE_COLUMNS  # the row columns a baseline cell keeps (harness/schema.py)


@dataclass(frozen=True)
class GateOptions:
    """How to gate (the CLI's `harness gate` options, the recipe's `gate:` section). None means
    "the baseline's own, else the default" (see the module's precedence)."""

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

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    @property
    def power_warnings(self) -> list[str]:
        return [f"{c.where}: {c.power_warning}" for c in self.checks if c.power_warning]

    def summary(self) -> str:
        cells = len({c.where for c in self.checks})
        if not self.failures:
            return f"gate passed: {len(self.checks)} checks on {cells} cells of {self.run_id} vs {self.baseline}"
        first = self.failures[0].message()
        more = f" (+{len(self.failures) - 1} more)" if len(self.failures) > 1 else ""
        return f"gate failed: {len(self.failures)} of {len(self.checks)} checks below bound: {first}{more}"


# ----------------------------------------------------------------------------- pure core


def baseline_cells(rows: list[CellRow], tolerance: float) -> list[BaselineCell]:
    """Baseline entries from a run's finished, ok speculative rows."""
    out = []
    for r in rows:
        if is_speculative(r) and r.ok and r.acceptance_length is not None:
            entry = BaselineCell.of_row(r)
            entry.per_position_floors = [x * (1 - tolerance) for x in r.per_position_rates or []]
            if entry.breakdowns.segment:
                entry.segment_floors = _segment_floors(entry, tolerance)
            out.append(entry)
    return out


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
    from harness.analysis.machine import FLAG

    noisy = next((f for f in row.flags or [] if str(f).startswith(FLAG)), None)
    if noisy is None:
        return check
    return replace(
        check,
        passed=False,
        detail=f"{fmt(check.value)}x was measured on an unsteady machine "
        f"({noisy.split(';')[0]}); a flagged speedup cannot pass a floor: rerun on a quiet machine",
    )


def _segment_floors(base: GatedCell, tolerance: float) -> dict[str, float]:
    return {b.label: b.al * (1 - tolerance) for b in base.breakdowns.segment.measured()}


def segment_checks(
    base: BaselineCell, row: CellRow, tolerance: float, use_stored: bool, noise_aware: bool = False
) -> list[Check]:
    """AL per thinking/answer segment against its floor: the baseline's stored `segment_floors`
    (pinned by hand, like per-position floors) unless a tolerance was given, else baseline
    segment AL × (1 − tolerance). A segment the run's outputs lack fails, saying so."""
    stored = base.segment_floors
    floors = stored if use_stored and stored is not None else _segment_floors(base, tolerance)
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
        key = setting(base)
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


def evaluate(run: Run, baseline: BaselineFile, baseline_name: str, options: GateOptions | None = None) -> GateResult:
    """Match the run's speculative cells to the baseline's and check each (no I/O)."""
    o = options or GateOptions()
    baseline = cells_for_run_verifiers(baseline, run.rows)
    stored_tol = DEFAULT_TOLERANCE if baseline.tolerance is None else baseline.tolerance
    tol = float(stored_tol) if o.tolerance is None else o.tolerance
    max_crossover_drop = baseline.max_crossover_drop if o.max_crossover_drop is None else o.max_crossover_drop
    rows = [r for r in run.rows if is_speculative(r)]
    if o.draft is not None:
        labels = sorted({str(r.draft) for r in rows})
        rows = [r for r in rows if r.draft == o.draft]
        if not rows:
            raise BadInput(f"--draft {o.draft}: run {run.label} has no such draft; its drafts: {', '.join(labels)}")
    by_setting: dict[Setting, list[CellRow]] = {}
    for r in rows:
        by_setting.setdefault(setting(r), []).append(r)
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
    if max_crossover_drop is not None:
        load_checks, load_problems = gate_load.crossover_checks(
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
    if not checks:
        raise BadInput(
            f"nothing to gate: no cell of run {run.label} matches baseline {baseline_name}"
            + (f" ({problems[0]})" if problems else "")
        )
    source = (
        "--floors"
        if o.floors is not None
        else "baseline.json per_position_floors"
        if o.tolerance is None
        else f"baseline rates × (1 − {tol:g})"
    )
    base_keys = {setting(base) for base in baseline.cells}
    extra = tuple(describe_setting(k) for k in by_setting if k not in base_keys)
    return GateResult(
        run.label,
        baseline_name,
        tol,
        o.noise_aware,
        o.min_speedup,
        source,
        tuple(checks),
        tuple(problems),
        extra,
        run.incomplete_note(),
        max_crossover_drop,
    )


# ----------------------------------------------------------------------------- I/O edge


def find_baseline_dir(path: str | Path) -> Path | None:
    """A baseline folder from a path (absolute, or relative to the working directory or the
    repository) or a name under results/baselines/; None when there is none yet."""
    from harness.paths import BASELINES_DIR, REPO_ROOT

    p = Path(path)
    for cand in (p, REPO_ROOT / p, BASELINES_DIR / str(path)):
        if (cand / BASELINE_FILE).is_file():
            return cand
    return None


def verdict_dict(res: GateResult) -> dict[str, Any]:
    """The gate's verdict as gate.json holds it: what the report shows, read back without parsing a renderer."""
    return {
        "run_id": res.run_id,
        "baseline": res.baseline,
        "checks": len(res.checks),
        "failures": [c.message() for c in res.checks if not c.passed],
        "not_gated": list(res.not_gated),
    }


def write_gate_files(
    result: GateResult, markdown: Path | None = None, junit: Path | None = None, verdict: Path | None = None
) -> None:
    from harness.provenance import atomic_write_json, atomic_write_text

    if markdown:
        atomic_write_text(markdown, to_markdown(result))
    if junit:
        atomic_write_text(junit, to_junit(result))
    if verdict:
        atomic_write_json(verdict, verdict_dict(result))


def resolve_baseline_dir(path: str | Path) -> Path:
    """A baseline folder from a path or a name under results/baselines/."""
    found = find_baseline_dir(path)
    if found is not None:
        return found
    raise BadInput(
        f"{path}: no {BASELINE_FILE} there (nor under results/baselines/); "
        f"write one with `harness gate RUN --baseline {path} --update-baseline`"
    )


def read_baseline(folder: Path) -> BaselineFile:
    from harness.results.manifest import read_manifest_data

    try:
        data = json.loads((folder / BASELINE_FILE).read_text())
    except ValueError as e:  # malformed JSON or not UTF-8
        raise BadInput(f"{folder}: unreadable baseline ({e})") from e
    if not isinstance(data, dict):
        raise BadInput(f"{folder / BASELINE_FILE}: unreadable baseline (not a JSON object)")
    baseline = BaselineFile.from_dict(data)
    if baseline.format != FORMAT:
        raise BadInput(f"{folder / BASELINE_FILE}: format {baseline.format!r}, expected {FORMAT}")
    manifest = Manifest.from_dict(read_manifest_data(folder, missing_ok=True))
    if manifest.data and manifest.run_id != baseline.source_run_id:
        raise BadInput(
            f"{folder}: manifest.json (run {manifest.run_id}) and baseline.json "
            f"(run {baseline.source_run_id}) disagree: an update was cut short; rewrite it"
        )
    return baseline


def gate(run: str | Path, baseline_dir: str | Path, options: GateOptions | None = None) -> GateResult:
    folder = resolve_baseline_dir(baseline_dir)
    return evaluate(read_run(run), read_baseline(folder), folder.name, options)


def _other_verifiers_cells(path: Path, replaced: set[str]) -> list[BaselineCell]:
    """An existing baseline's cells of other verifiers: an update replaces only its run's verifiers."""
    if not path.is_file():
        return []
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    if not isinstance(old, dict):
        return []
    return [c for c in BaselineFile.from_dict(old).cells if c.verifier_hash not in replaced]


def other_verifier_only(baseline_dir: Path, run: str | Path) -> str | None:
    """The baseline's verifier hashes when it holds no cell of the run's verifiers (it cannot gate
    this run: the main job says so and how to add them), else None."""
    if not (Path(baseline_dir) / BASELINE_FILE).is_file():
        return None
    cells = read_baseline(Path(baseline_dir)).cells  # the reader gate() uses: one format check
    theirs = {str(c.verifier_hash) for c in cells}
    mine = {str(r.verifier_hash) for r in read_run(run).rows}
    return ", ".join(sorted(theirs)) if cells and mine and not theirs & mine else None


def cells_for_run_verifiers(baseline: BaselineFile, rows: list[CellRow]) -> BaselineFile:
    """A baseline may hold cells for several verifiers (one set per verifier hash: e.g. the CPU
    stand-in pretrained in bf16 where the CPU computes it natively and in float32 where it does
    not, harness/hardware.py). The run is gated against the cells of its own verifiers; a baseline
    with none of them is left whole, so the mismatch is reported as today."""
    mine = {r.verifier_hash for r in rows}
    ours = [c for c in baseline.cells if c.verifier_hash in mine]
    return baseline.model_copy(update={"cells": ours}) if ours and len(ours) < len(baseline.cells) else baseline


def update_baseline(
    run: str | Path,
    baseline_dir: str | Path,
    tolerance: float = DEFAULT_TOLERANCE,
    allow_missing: bool = False,
    draft: str | None = None,
    max_crossover_drop: float | None = None,
) -> Path:
    """Write baseline_dir/{manifest,baseline}.json from a run (each file atomic, baseline last)."""
    from harness.provenance import atomic_write_json

    r = read_run(run)
    if r.missing and not allow_missing:
        raise BadInput(
            f"run {r.label} is {r.status} with {len(r.missing)} planned cells missing; a baseline from "
            "it would gate only part of the matrix: finish it (--resume) or pass --allow-missing"
        )
    rows = [x for x in r.rows if is_speculative(x) and (draft is None or x.draft == draft)]
    failed = [describe_setting(setting(x)) for x in rows if not x.ok]
    if failed and not allow_missing:
        raise BadInput(
            f"run {r.label}: failed cells {', '.join(failed)} cannot be a baseline; rerun them "
            "or pass --allow-missing to leave them out"
        )
    cells = baseline_cells(rows, tolerance)
    keys = [setting(c) for c in cells]
    if len(set(keys)) != len(keys):
        raise BadInput(f"run {r.label} has several drafts per cell; pass --draft to choose the baseline's")
    if not cells:
        raise BadInput(f"run {r.label} has no finished speculative cell to make a baseline from")
    out = Path(baseline_dir)
    cells += _other_verifiers_cells(out / BASELINE_FILE, {c.verifier_hash for c in cells})
    atomic_write_json(out / MANIFEST_FILE, r.manifest.data)
    baseline = BaselineFile(
        format=FORMAT,
        source_run_id=r.manifest.run_id,
        tolerance=tolerance,
        max_crossover_drop=max_crossover_drop,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        cells=cells,
        crossovers=gate_load.baseline_crossovers(rows),
    )
    atomic_write_json(out / BASELINE_FILE, baseline.to_dict())
    return out


# ----------------------------------------------------------------------------- renderers


def _row(c: Check) -> list[str]:
    value = fmt(c.value) + (f" (CI↑ {fmt(c.compared)})" if c.compared not in (None, c.value) else "")
    mdd = "" if c.min_detectable_drop is None else f"{c.min_detectable_drop:.1%}" + (" ⚠" if c.power_warning else "")
    return [
        c.suite,
        c.draft,
        str(c.k),
        str(c.concurrency),
        f"{c.temperature:g}",
        c.metric,
        fmt(c.baseline),
        value,
        fmt(c.bound),
        mdd,
        "pass" if c.passed else "FAIL",
    ]


HEADERS = [
    "suite",
    "draft",
    "k",
    "concurrency",
    "T",
    "metric",
    "baseline",
    "value",
    "bound",
    "detectable drop",
    "verdict",
]


def notes(res: GateResult) -> list[str]:
    out = [f"low power: {w}" for w in res.power_warnings]
    out += [f"not gated: {p}" for p in res.not_gated]
    out += [f"no baseline for run cell {e} (not gated)" for e in res.extra]
    return out + ([f"incomplete run: {res.incomplete}"] if res.incomplete else [])


_NOISE_AWARE = "on (value + the run's and the baseline's CI half-widths in quadrature)"


def _settings_line(res: GateResult) -> str:
    return (
        f"tolerance {res.tolerance:g} (AL bound = baseline AL × {1 - res.tolerance:g}); "
        f"per-position floors: {res.floors_source}; noise-aware: {_NOISE_AWARE if res.noise_aware else 'off'}; "
        "detectable drop = smallest relative AL drop the cell's prompts detect (80 % power)"
        + (f"; min speedup {res.min_speedup:g}x" if res.min_speedup is not None else "")
        + (
            f"; crossover concurrency bound = baseline × {1 - res.max_crossover_drop:g}"
            if res.max_crossover_drop is not None
            else ""
        )
    )


def to_rich(res: GateResult):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(f"gate: {res.run_id} vs baseline {res.baseline}"), caption=escape(_settings_line(res)))
    for h in HEADERS:
        t.add_column(h, justify="left" if h in ("suite", "draft", "metric", "verdict") else "right")
    for c in res.checks:
        row = [escape(x) for x in _row(c)]
        row[-1] = "[green]pass[/]" if c.passed else "[bold red]FAIL[/]"
        t.add_row(*row)
    return t


def to_markdown(res: GateResult) -> str:
    verdict = "✅ passed" if not res.failures else f"❌ failed ({len(res.failures)} of {len(res.checks)} checks)"
    out = [
        f"### Gate {verdict}: `{res.run_id}` vs baseline `{res.baseline}`",
        "",
        _settings_line(res),
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    out += ["| " + " | ".join(_row(c)[:-1] + ["pass" if c.passed else "**FAIL**"]) + " |" for c in res.checks]
    out += [""] + [f"- {n}" for n in notes(res)]
    out.append(
        "\nAL = 1 + accepted/drafts (pooled, incl. the bonus token); per_position_rate[i] = accepted at "
        "position i / drafts; speedup = spec ÷ baseline output tok/s (harness/metrics.py)."
    )
    return "\n".join(out) + "\n"


def to_junit(res: GateResult) -> str:
    """JUnit XML: one testcase per check (a failure carries its message); cells left out are skipped."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="harness gate")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"gate {res.run_id} vs {res.baseline}",
        tests=str(len(res.checks) + len(res.not_gated)),
        failures=str(len(res.failures)),
        errors="0",
        skipped=str(len(res.not_gated)),
    )
    for c in res.checks:
        tc = ET.SubElement(
            suite, "testcase", classname=f"gate.{c.suite}.k{c.k}.c{c.concurrency}.t{c.temperature:g}", name=c.metric
        )
        if not c.passed:
            ET.SubElement(tc, "failure", message=c.message(), type="Regression").text = c.message()
    for p in res.not_gated:
        tc = ET.SubElement(suite, "testcase", classname="gate.not_gated", name=p.split(":")[0])
        ET.SubElement(tc, "skipped", message=p)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
