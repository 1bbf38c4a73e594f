"""The run's result table: one row per measured cell and mode (baseline / speculative).

On disk, under results/runs/<run-id>/:
  manifest.json      what ran (provenance, recipe, planned cells, status, start/end time)
  cells/<cell>.json  the rows of one finished cell, written atomically when the cell ends:
                     {"format": 2, "rows": [...]}, each row a CellRow (harness/schema.py; its JSON
                     schema is docs/cell.schema.json); format 1 (a bare list of flat rows) is read
                     by one converter, a format this version does not know is refused
  cells/requests/<cell>.json  the cell's per-request records by arm ({"baseline": [...],
                     "speculative": [...]}: request id, repeat, prompt tokens, output token ids,
                     latency, TTFT, send time (open loop: scheduled arrival) and wait for a
                     slot, vLLM's per-step accepted/drafted arrays); written just before the cell
  results.parquet    every finished cell's rows, typed (written atomically once, when the run ends
                     however it ends; during a run the cells are the record)
  results.csv        the same, for spreadsheets and pull requests
  derived.json       sha256 of both tables and of the cells they came from (stale tables, e.g.
                     after a SIGKILL, are rebuilt by `bench --resume` and `bench --merge`)

A killed run keeps every finished cell; `--resume` runs only the missing ones. One line of
pandas loads a run: `pd.read_parquet("results/runs/<id>/results.parquet")`.

Columns (raw counters are kept so any other definition can be recomputed; the formulas are
in harness/metrics.py):
  identity   run_id cell_id draft method mode suite suite_version suite_sha k concurrency
             temperature top_p max_tokens repeats engine rejection_sample_method
             verifier_hash draft_hash request_rate (offered requests/s, open-loop arrivals; 0: closed
             loop, every request sent at once under the concurrency cap)
  counters   num_requests num_failed num_output_tokens wall_s num_drafts num_draft_tokens
             num_accepted_tokens accepted_per_pos lossless_matches lossless_compared num_verify_steps
  derived    acceptance_length draft_acceptance_rate per_position_rates al_ci_low al_ci_high
             tokens_per_step (AL over every decode step, undrafted ones included: ngram's and
             suffix's AL counts only the steps where they found a match)
             per_request_al_mean output_tok_per_s output_tok_per_s_repeats speedup
             lossless_match_rate ttft_ms_median ttft_ms_p99 tpot_ms_median tpot_ms_p99
             itl_ms_median itl_ms_p99 (per streamed chunk: a verify step delivers up to k+1 tokens
             in one) itl_per_token_ms_median itl_per_token_ms_p99 (each chunk's gap spread over its
             tokens, metrics.per_token_itl; averages to TPOT) predicted_acceptance_length al_gap
             speedup_ci_low speedup_ci_high (analysis/load.py; widened by speedup_between_run_sd,
             this machine's between-run SD of ln speedup, measured as speedup_between_run_source
             says: bench/machine_record.py) al_se num_prompts (analysis/power.py)
  latency    ttft_ms_p90 tpot_ms_p90 itl_per_token_ms_p90 e2e_ms_median e2e_ms_p90 e2e_ms_p99 (per
             finished request, ms); open-loop cells: arrival_rate achieved_rate (sends/s within
             each arrival schedule; finished / first send to last finish), with bench.slo goodput (requests/s meeting
             every bound) slo_attainment (their share) (analysis/slo.py); prefix_cache_hit_rate
             prefix_cache_hit_rate_by_turn (vLLM's prompt tokens found cached / looked up, the arm's
             whole and per turn index; None when the engine reported no lookups); speedup_by_turn
             (multi-turn suites: each turn's rounds, speculative output tok/s over the baseline's)
  breakdowns <what>_buckets / segments / turns, al_by_<what>, al_by_<what>_ci_low/_ci_high, drafts_by_<what>
             for what in output_position, prompt_length, segment, turn (analysis/steps.py; lists, one
             entry per bucket; empty when vLLM gave no per-step record; in a cell file and in
             memory one typed `breakdowns` column, flattened here); k_sweep / al_by_k*: AL at
             k' = 1 .. k from this cell's engine (bench.k_from_one_engine, analysis/k_sweep.py:
             exact at k' = k, an estimate below)
  workload   repetition_share looping_requests (the baseline arm's outputs, analysis/repetition.py)
             max_prompt_tokens train_context_len
  T = 0      lossless_verdict lossless_first_position lossless_noise_nats lossless_divergences (each
             miss located and classified, analysis/lossless.py)
  T > 0      sampling_p_value sampling_tv sampling_min_detectable_tv sampling_num_tokens
             sampling_rescore (the distribution test, analysis/lossless_sampling.py)
  machine    machine_sentinels_baseline machine_sentinels_speculative machine_drift machine_noise
             machine_baseline_remeasured machine_foreign_cpu (analysis/machine.py)
  arms       baseline_cell (the cell that measured a shared baseline arm) k_schedule (a dynamic arm's
             schedule, JSON) engine_schedule (side_by_side | one_at_a_time: harness/bench/one_at_a_time.py)
  rounds     prompts_budget sequential_planned sequential_looks sequential_stop (a sequential paired cell,
             gate.max_prompts: the prompts it could draw, the paired requests they make, the paired
             requests at each look, and pass | fail | budget, why its rounds stopped; num_prompts is what
             it drew)
  race       race_looks race_exit (a raced answer table, bench.race: the looks its budget allowed, and
             out | settled | budget, how the arm left the race; prompts_budget and num_prompts as above)
  status     status (ok | failed) error flags
The typed record of a row is harness/schema.py's CellRow: `read_run_rows` reads a run's cells into
CellRows (one validation per cell file); the tables are `CellRow.to_dict()` of each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import BadInput
from harness.provenance import atomic_path, atomic_write_json, file_sha256
from harness.schema import (
    CELL_FORMAT,
    CELLS_DIR,
    CSV_FILE,
    DERIVED_FILE,
    MANIFEST_FILE,
    REQUESTS_DIR,
    TABLE_FILE,
    CellFile,
    CellRow,
    Derived,
)
from harness.schema_manifest import Manifest

LIST_COLUMNS = tuple(CellRow.flat_list_columns())  # JSON in results.csv
MANIFEST, TABLE, CSV, DERIVED = MANIFEST_FILE, TABLE_FILE, CSV_FILE, DERIVED_FILE
READ_FORMATS = (1, CELL_FORMAT)


def cell_id(draft: str, suite: str, k: int, concurrency: int, temperature: float, request_rate: float = 0.0) -> str:
    """The cell's file name; an open-loop cell's ends in its offered rate (closed-loop ids as before)."""
    base = f"{draft}__{suite}__k{k}__c{concurrency}__t{temperature:g}"
    return f"{base}__r{request_rate:g}" if request_rate else base


def write_cell(
    run_dir: Path,
    cid: str,
    rows: Sequence[CellRow | Mapping[str, Any]],
    requests: dict[str, list[dict[str, Any]]] | None = None,
) -> None:
    """The cell's per-request side file first, then its rows (the file that marks it finished), in
    this version's format (a row given as flat columns is read by `CellRow.from_dict`). A cell file
    already there from another suite (another content hash under the same cell id) is never
    overwritten: that would lose a measurement without a word. The tables derived from the cells
    are written once, when the run ends (ensure_tables): rebuilding them after every cell made a
    run's bookkeeping grow with the square of its cells."""
    typed = [r if isinstance(r, CellRow) else CellRow.from_dict(r) for r in rows]
    data = CellFile(rows=typed).model_dump()
    try:  # what the reader would refuse (a row missing a column) is never written
        CellFile.model_validate(data)
    except ValidationError as e:
        raise BadInput(f"cell {cid}: not a complete row ({_first_error(e)})") from e
    _refuse_foreign_cell(run_dir / CELLS_DIR / f"{cid}.json", typed)
    if requests is not None:
        atomic_write_json(run_dir / CELLS_DIR / REQUESTS_DIR / f"{cid}.json", requests, compact=True)
    atomic_write_json(run_dir / CELLS_DIR / f"{cid}.json", data)


def _refuse_foreign_cell(path: Path, rows: list[CellRow]) -> None:
    if not path.is_file() or not rows:
        return
    try:
        old = read_cell(path)
    except BadInput:
        return  # a torn file is rewritten
    had = {(r.suite, r.suite_sha) for r in old}
    new = {(r.suite, r.suite_sha) for r in rows}
    if had and had != new:
        raise BadInput(
            f"{path}: holds the cell of suite {sorted(had)[0][0]} (sha {sorted(had)[0][1]}); "
            f"refusing to overwrite it with suite sha {sorted(new)[0][1]}: two suites share the "
            "name; give each suite a name of its own, or use a new run id"
        )


def read_cell(path: Path) -> list[CellRow]:
    """A cell file's rows: this version's format validated in one pass; format 1 (a bare list of
    flat rows, written before the format was versioned) through its converter, `CellRow.from_dict`;
    any other format refused in one line."""
    raw = path.read_bytes()
    if raw.lstrip()[:1] == b"[":
        try:
            return [CellRow.from_dict(r) for r in json.loads(raw) if isinstance(r, Mapping)]
        except ValueError as e:
            raise BadInput(f"{path}: unreadable cell file ({e}); delete it and rerun with --resume") from e
    try:
        return CellFile.model_validate_json(raw).rows
    except ValidationError as e:
        found = _format_of(raw)
        if found is not None and found not in READ_FORMATS:
            raise BadInput(
                f"{path}: cell format {found!r}, which this harness does not read (it reads "
                f"{', '.join(map(str, READ_FORMATS))}): read the run with the harness version that wrote it"
            ) from e
        raise BadInput(f"{path}: unreadable cell file ({_first_error(e)}); delete it and rerun with --resume") from e


def _format_of(raw: bytes) -> Any:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data.get("format", "none") if isinstance(data, dict) else None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))


def load_cell_requests(run_dir: Path, cid: str) -> dict[str, list[dict[str, Any]]] | None:
    """A cell's per-request records by arm, or None for cells written without them."""
    p = run_dir / CELLS_DIR / REQUESTS_DIR / f"{cid}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def finished_cells(run_dir: Path) -> set[str]:
    folder = run_dir / CELLS_DIR
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def read_rows(run_dir: Path) -> list[CellRow]:
    """Every finished cell's rows, in cell file order."""
    folder = run_dir / CELLS_DIR
    return [r for p in (sorted(folder.glob("*.json")) if folder.is_dir() else []) for r in read_cell(p)]


def rows_to_frame(rows: Sequence[CellRow]):
    """The table of the rows: one flat column per CellRow.to_dict() key (every column present,
    also with no rows). The one place a DataFrame is made of rows: results.parquet / results.csv
    (rebuild_table), and scripts or tests that want pandas; harness/ reads a run as CellRows
    (runs.read_run)."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() for r in rows], columns=CellRow.flat_columns())


def cells_digest(run_dir: Path) -> str:
    """One hash over the finished cell files (names and bytes): what the tables were built from."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((run_dir / CELLS_DIR).glob("*.json")) if (run_dir / CELLS_DIR).is_dir() else []:
        h.update(p.name.encode() + b"\0" + file_sha256(p).encode() + b"\n")
    return h.hexdigest()


def tables_stale(run_dir: Path) -> str | None:
    """Why results.parquet / results.csv do not match `cells/` (None when they do): a file
    missing, changed since it was written (its hash differs from DERIVED), or built from other
    cells."""
    if not finished_cells(run_dir):
        return None
    try:
        recorded = json.loads((run_dir / DERIVED).read_text())
    except (OSError, ValueError):
        return f"no readable {DERIVED}"
    derived = Derived.from_dict(recorded if isinstance(recorded, dict) else {})
    if derived.cells_sha256 != cells_digest(run_dir):
        return "built from other cells"
    for name in (TABLE, CSV):
        if not (run_dir / name).is_file():
            return f"{name} missing"
        if derived.files.get(name) != file_sha256(run_dir / name):
            return f"{name} changed since it was written"
    return None


def ensure_tables(run_dir: Path) -> str | None:
    """Rebuild the derived tables when they are missing or stale; returns why, or None when
    they were current. `bench --resume` calls it, so a resumed run never points at a stale table."""
    why = tables_stale(run_dir)
    if why:
        rebuild_table(run_dir)
    return why


def rebuild_table(run_dir: Path) -> None:
    """results.parquet and results.csv from the finished cells (atomic replace), and their
    hashes with the cells' digest in DERIVED (written last: a kill before it means stale)."""
    rows = read_rows(run_dir)
    if not rows:
        return
    digest = cells_digest(run_dir)
    df = rows_to_frame(rows)
    with atomic_path(run_dir / TABLE) as tmp:
        df.to_parquet(tmp, index=False)
    csv = df.copy()
    for col in LIST_COLUMNS:
        csv[col] = csv[col].apply(json.dumps)
    with atomic_path(run_dir / CSV) as tmp:
        csv.to_csv(tmp, index=False)
    files = {n: file_sha256(run_dir / n) for n in (TABLE, CSV)}
    atomic_write_json(run_dir / DERIVED, Derived(cells_sha256=digest, files=files).model_dump())


def resolve_run(run: str | Path, runs_root: Path | None = None) -> Path:
    """A run folder from a path or a run id under results/runs/."""
    from harness.paths import RUNS_DIR

    p = Path(run)
    if (p / MANIFEST).is_file():
        return p
    root = runs_root or RUNS_DIR
    if (root / str(run) / MANIFEST).is_file():
        return root / str(run)
    raise BadInput(f"{run}: not a run folder (no {MANIFEST}); pass a path under results/runs/ or a run id")


def read_run_rows(run: str | Path) -> tuple[Manifest, list[CellRow], list[str]]:
    """(manifest, finished rows, missing cell ids) for a run; works on killed runs."""
    from harness.results.manifest import read_manifest

    folder = resolve_run(run)
    manifest = read_manifest(folder)  # a dead run's stale "running" reads as interrupted
    rows = read_rows(folder)
    done = finished_cells(folder)
    return manifest, rows, [c for c in manifest.planned_cells if c not in done]
