"""The run's result table: one row per measured cell and mode (baseline / speculative).

On disk, under results/runs/<run-id>/:
  manifest.json      what ran (provenance, recipe, planned cells, status, start/end time)
  cells/<cell>.json  the rows of one finished cell, written atomically when the cell ends
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
             speedup_ci_low speedup_ci_high (analysis/load.py) al_se num_prompts (analysis/power.py)
  latency    ttft_ms_p90 tpot_ms_p90 itl_per_token_ms_p90 e2e_ms_median e2e_ms_p90 e2e_ms_p99 (per
             finished request, ms); open-loop cells: arrival_rate achieved_rate (sends/s within
             each arrival schedule; finished / first send to last finish), with bench.slo goodput (requests/s meeting
             every bound) slo_attainment (their share) (analysis/slo.py); prefix_cache_hit_rate
             prefix_cache_hit_rate_by_turn (vLLM's prompt tokens found cached / looked up, the arm's
             whole and per turn index; None when the engine reported no lookups); speedup_by_turn
             (multi-turn suites: each turn's rounds, speculative output tok/s over the baseline's)
  breakdowns <what>_buckets / segments / turns, al_by_<what>, al_by_<what>_ci_low/_ci_high, drafts_by_<what>
             for what in output_position, prompt_length, segment, turn (analysis/steps.py; lists, one
             entry per bucket; empty when vLLM gave no per-step record); k_sweep / al_by_k*: AL at
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
  status     status (ok | failed) error flags
The typed record of a row is harness/schema.py's CellRow (read back with CellRow.from_dict).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.provenance import atomic_path, atomic_write_json
from harness.schema import (
    CELLS_DIR,
    CSV_FILE,
    DERIVED_FILE,
    MANIFEST_FILE,
    REQUESTS_DIR,
    TABLE_FILE,
    CellRow,
    Derived,
    Manifest,
)

BREAKDOWNS = ("output_position", "prompt_length", "segment", "turn", "k")
LIST_COLUMNS = (
    "accepted_per_pos",
    "per_position_rates",
    "output_tok_per_s_repeats",
    "flags",
    "machine_sentinels_baseline",
    "machine_sentinels_speculative",
    "output_position_buckets",
    "prompt_length_buckets",
    "segments",
    "turns",
    "k_sweep",
    *(
        f"{c}_by_{b}{e}"
        for b in BREAKDOWNS
        for c, e in (("al", ""), ("al", "_ci_low"), ("al", "_ci_high"), ("drafts", ""))
    ),
)
MANIFEST, TABLE, CSV, DERIVED = MANIFEST_FILE, TABLE_FILE, CSV_FILE, DERIVED_FILE


def cell_id(draft: str, suite: str, k: int, concurrency: int, temperature: float, request_rate: float = 0.0) -> str:
    """The cell's file name; an open-loop cell's ends in its offered rate (closed-loop ids as before)."""
    base = f"{draft}__{suite}__k{k}__c{concurrency}__t{temperature:g}"
    return f"{base}__r{request_rate:g}" if request_rate else base


def write_cell(
    run_dir: Path, cid: str, rows: list[dict[str, Any]], requests: dict[str, list[dict[str, Any]]] | None = None
) -> None:
    """The cell's per-request side file first, then its rows (the file that marks it finished).
    A cell file already there from another suite (another content hash under the same cell id) is
    never overwritten: that would lose a measurement without a word. The tables derived from the
    cells are written once, when the run ends (ensure_tables): rebuilding them after every cell
    made a run's bookkeeping grow with the square of its cells."""
    _refuse_foreign_cell(run_dir / CELLS_DIR / f"{cid}.json", rows)
    if requests is not None:
        atomic_write_json(run_dir / CELLS_DIR / REQUESTS_DIR / f"{cid}.json", requests, compact=True)
    atomic_write_json(run_dir / CELLS_DIR / f"{cid}.json", rows)


def _refuse_foreign_cell(path: Path, rows: list[dict[str, Any]]) -> None:
    if not path.is_file() or not rows:
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return  # a torn file is rewritten
    had = {_suite_of(r) for r in old if isinstance(r, dict)}
    new = {_suite_of(r) for r in rows}
    if had and had != new:
        raise BadInput(
            f"{path}: holds the cell of suite {sorted(had)[0][0]} (sha {sorted(had)[0][1]}); "
            f"refusing to overwrite it with suite sha {sorted(new)[0][1]}: two suites share the "
            "name; give each suite a name of its own, or use a new run id"
        )


def _suite_of(row: dict[str, Any]) -> tuple[str, str]:
    r = CellRow.from_dict(row)
    return (r.suite, r.suite_sha)


def load_cell_requests(run_dir: Path, cid: str) -> dict[str, list[dict[str, Any]]] | None:
    """A cell's per-request records by arm, or None for cells written without them."""
    p = run_dir / CELLS_DIR / REQUESTS_DIR / f"{cid}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def finished_cells(run_dir: Path) -> set[str]:
    folder = run_dir / CELLS_DIR
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def load_rows(run_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in sorted((run_dir / CELLS_DIR).glob("*.json")) if (run_dir / CELLS_DIR).is_dir() else []:
        try:
            rows += json.loads(p.read_text(encoding="utf-8"))
        except ValueError as e:  # malformed JSON (a truncated file) or not UTF-8
            raise BadInput(f"{p}: unreadable cell file ({e}); delete it and rerun with --resume") from e
    return rows


def rows_to_frame(rows: list[dict[str, Any]]):
    import pandas as pd

    df = pd.DataFrame(rows)
    for col in LIST_COLUMNS:
        if col in df.columns:
            df[col] = df[col].apply(lambda v: list(v) if isinstance(v, list | tuple) else [])
    return df


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cells_digest(run_dir: Path) -> str:
    """One hash over the finished cell files (names and bytes): what the tables were built from."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((run_dir / CELLS_DIR).glob("*.json")) if (run_dir / CELLS_DIR).is_dir() else []:
        h.update(p.name.encode() + b"\0" + _sha256(p).encode() + b"\n")
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
        if derived.files.get(name) != _sha256(run_dir / name):
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
    rows = load_rows(run_dir)
    if not rows:
        return
    digest = cells_digest(run_dir)
    df = rows_to_frame(rows)
    with atomic_path(run_dir / TABLE) as tmp:
        df.to_parquet(tmp, index=False)
    csv = df.copy()
    for col in LIST_COLUMNS:
        if col in csv.columns:
            csv[col] = csv[col].apply(json.dumps)
    with atomic_path(run_dir / CSV) as tmp:
        csv.to_csv(tmp, index=False)
    atomic_write_json(run_dir / DERIVED, asdict(Derived(digest, {n: _sha256(run_dir / n) for n in (TABLE, CSV)})))


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


def load_run(run: str | Path) -> tuple[Manifest, Any, list[str]]:
    """(manifest, DataFrame of finished rows, missing cell ids) for a run; works on killed runs."""
    from harness.results.manifest import read_manifest

    folder = resolve_run(run)
    manifest = read_manifest(folder)  # a dead run's stale "running" reads as interrupted
    rows = load_rows(folder)
    df = rows_to_frame(rows) if rows else rows_to_frame([])
    planned = manifest.planned_cells
    done = finished_cells(folder)
    missing = [c for c in planned if c not in done]
    return manifest, df, missing
