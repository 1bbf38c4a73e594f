"""The baseline folder, results/baselines/<name>/ (docs/gate.md, "Baseline folder"): finding and
reading it, building its cells and crossover lines from a run, writing it; and `gate`, which reads a
run and a baseline and evaluates one against the other (`gate_run` for a run already read).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from harness.errors import BadInput
from harness.results import load_view
from harness.results.gate.cell_checks import segment_floors
from harness.results.gate.crossover_checks import position
from harness.results.gate.evaluate import DEFAULT_TOLERANCE, GateOptions, GateResult, evaluate
from harness.results.runs import Run, describe_setting, read_run
from harness.schema import MANIFEST_FILE, CellRow
from harness.schema_baseline import BASELINE_FILE, BASELINE_FORMAT, BaselineCell, BaselineCrossover, BaselineFile
from harness.schema_manifest import Manifest


def baseline_cells(rows: list[CellRow], tolerance: float) -> list[BaselineCell]:
    """Baseline entries from a run's finished, ok speculative rows."""
    out = []
    for r in rows:
        if r.is_speculative and r.ok and r.acceptance_length is not None:
            entry = BaselineCell.of_row(r)
            entry.per_position_floors = [x * (1 - tolerance) for x in r.per_position_rates or []]
            if entry.breakdowns.segment:
                entry.segment_floors = segment_floors(entry, tolerance)
            out.append(entry)
    return out


def baseline_crossovers(rows: list[CellRow]) -> list[BaselineCrossover]:
    """The run's crossover lines as baseline.json stores them."""
    out = []
    for line in load_view.crossovers(rows):
        c = line.crossover
        out.append(
            BaselineCrossover(
                draft=line.draft,
                suite=line.suite,
                k=line.k,
                temperature=line.temperature,
                concurrencies=list(line.concurrencies),
                where=load_view.ONE_LOAD_POINT if c is None else c.point.where,
                crossover=None if c is None else position(c.point, line.concurrencies),
                text=line.text(),
            )
        )
    return out


def find_baseline_dir(path: str | Path) -> Path | None:
    """A baseline folder from a path (absolute, or relative to the working directory or the
    repository) or a name under results/baselines/; None when there is none yet."""
    from harness.paths import BASELINES_DIR, REPO_ROOT

    p = Path(path)
    for cand in (p, REPO_ROOT / p, BASELINES_DIR / str(path)):
        if (cand / BASELINE_FILE).is_file():
            return cand
    return None


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
    if baseline.format != BASELINE_FORMAT:
        raise BadInput(f"{folder / BASELINE_FILE}: format {baseline.format!r}, expected {BASELINE_FORMAT}")
    manifest = Manifest.from_dict(read_manifest_data(folder, missing_ok=True))
    if manifest.data and manifest.run_id != baseline.source_run_id:
        raise BadInput(
            f"{folder}: manifest.json (run {manifest.run_id}) and baseline.json "
            f"(run {baseline.source_run_id}) disagree: an update was cut short; rewrite it"
        )
    return baseline


def run_tolerance(run: Run) -> float:
    """The gate.tolerance of the recipe the run was benched with (its manifest), else DEFAULT_TOLERANCE."""
    tol = ((run.manifest.data.get("recipe") or {}).get("gate") or {}).get("tolerance")
    return float(tol) if isinstance(tol, int | float) else DEFAULT_TOLERANCE


def gate(run: str | Path, baseline_dir: str | Path | None, options: GateOptions | None = None) -> GateResult:
    """`harness gate`: the run read once, then `gate_run`."""
    return gate_run(read_run(run), baseline_dir, options)


def gate_run(run: Run, baseline_dir: str | Path | None, options: GateOptions | None = None) -> GateResult:
    """A run already read (the main job's) against the baseline folder and, when options name the
    baseline's draft and the run has its cells, paired against that draft (docs/gate.md, "Paired
    gate"); with no folder, the paired gate alone."""
    import dataclasses

    from harness.results.gate.paired_run import PairedCell, baseline_draft_hash, paired_cells

    o = options or GateOptions()
    # the paired gate's tolerance, unless given: the run's own recipe's (its sequential rounds stopped on it)
    tol = o.tolerance if o.tolerance is not None else run_tolerance(run)
    paired: list[PairedCell] = []
    missing: list[str] = []
    if o.baseline_draft and any(r.draft == o.baseline_draft for r in run.rows):
        paired, missing = paired_cells(run, o.draft or "draft", o.baseline_draft, tol)
    if baseline_dir is None:
        if not paired:
            raise BadInput(f"nothing to gate: no stored baseline, and run {run.label} has no baseline-draft cells")
        res = GateResult(
            run.label,
            str(o.baseline_draft),
            tol,
            o.noise_aware,
            o.min_speedup,
            "paired",
            (),
            (),
            (),
            run.incomplete_note(),
            None,
            tuple(paired),
            "paired",
        )
    else:
        folder = resolve_baseline_dir(baseline_dir)
        res = evaluate(run, read_baseline(folder), folder.name, o, paired)
    return dataclasses.replace(
        res,
        not_gated=res.not_gated + tuple(missing),
        baseline_draft_hash=baseline_draft_hash(run, o.baseline_draft) if paired and o.baseline_draft else None,
    )


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


def other_verifier_only(baseline_dir: Path, run: Run) -> str | None:
    """The baseline's verifier hashes when it holds no cell of the run's verifiers (it cannot gate
    this run: the main job says so and how to add them), else None."""
    if not (Path(baseline_dir) / BASELINE_FILE).is_file():
        return None
    cells = read_baseline(Path(baseline_dir)).cells  # the reader gate() uses: one format check
    theirs = {str(c.verifier_hash) for c in cells}
    mine = {str(r.verifier_hash) for r in run.rows}
    return ", ".join(sorted(theirs)) if cells and mine and not theirs & mine else None


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
    rows = [x for x in r.rows if x.is_speculative and (draft is None or x.draft == draft)]
    failed = [describe_setting(x.setting) for x in rows if not x.ok]
    if failed and not allow_missing:
        raise BadInput(
            f"run {r.label}: failed cells {', '.join(failed)} cannot be a baseline; rerun them "
            "or pass --allow-missing to leave them out"
        )
    cells = baseline_cells(rows, tolerance)
    keys = [c.setting for c in cells]
    if len(set(keys)) != len(keys):
        raise BadInput(f"run {r.label} has several drafts per cell; pass --draft to choose the baseline's")
    if not cells:
        raise BadInput(f"run {r.label} has no finished speculative cell to make a baseline from")
    out = Path(baseline_dir)
    cells += _other_verifiers_cells(out / BASELINE_FILE, {c.verifier_hash for c in cells})
    atomic_write_json(out / MANIFEST_FILE, r.manifest.data)
    baseline = BaselineFile(
        format=BASELINE_FORMAT,
        source_run_id=r.manifest.run_id,
        tolerance=tolerance,
        max_crossover_drop=max_crossover_drop,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        cells=cells,
        crossovers=baseline_crossovers(rows),
    )
    atomic_write_json(out / BASELINE_FILE, baseline.to_dict())
    return out
