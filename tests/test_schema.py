"""harness/schema.py: rows, baselines and manifests read back as the types they were written from,
and run folders of older versions still load (issue 29)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from harness.results.gate import read_baseline
from harness.results.runs import read_run
from harness.results.table import write_cell
from harness.schema import BASELINE_COLUMNS, BaselineFile, CellRow, Manifest
from tests.results_fixtures import make_run, rows_for

REPO = Path(__file__).resolve().parents[1]


def test_a_row_reads_back_as_the_row_it_was_written_from():
    row = CellRow.from_dict(rows_for("r", c=4)[1])
    assert row.is_speculative and row.acceptance_length is not None
    assert CellRow.from_dict(row.to_dict()) == row
    assert list(row.to_dict())[:3] == ["run_id", "cell_id", "draft"]  # identity columns first, as written


def test_a_row_of_an_older_version_loads_and_an_unknown_column_is_dropped(tmp_path):
    """A cell written before a column existed reads None (an empty list for list columns); a
    column this version does not know is dropped, so the folder still compares, gates, reports."""
    run = make_run(tmp_path, "new", [dict(c=4)])
    spec = next(r for r in read_run(run).rows if r.is_speculative)
    old = tmp_path / "old"
    (old / "cells").mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps({"run_id": "old", "status": "complete"}))
    written = [
        {k: v for k, v in r.to_dict().items() if not k.startswith(("machine_", "itl_per_token", "k_sweep"))}
        | {"a_future_column": 1}
        for r in read_run(run).rows
    ]
    write_cell(old, spec.cell_id, written)
    loaded = next(r for r in read_run(old).rows if r.is_speculative)
    assert loaded.machine_foreign_cpu is None and loaded.itl_per_token_ms_p99 is None
    assert loaded.k_sweep == [] and loaded.machine_sentinels_baseline == []
    assert loaded.acceptance_length == pytest.approx(spec.acceptance_length)
    assert not hasattr(loaded, "a_future_column")


@pytest.mark.parametrize("name", ["tiny-kimi", "tiny-kimi-ci"])
def test_committed_baselines_read_back_to_the_same_file(name):
    folder = REPO / "results" / "baselines" / name
    raw = json.loads((folder / "baseline.json").read_text())
    baseline = read_baseline(folder)
    assert baseline.cells and all(c.acceptance_length for c in baseline.cells)
    assert baseline.to_dict() == raw  # nothing lost or added on the way through the types


def test_a_baseline_cell_keeps_only_its_columns_and_floors():
    cell = BaselineFile.from_dict(
        {"format": 1, "cells": [{**rows_for("r", c=4)[1], "per_position_floors": [0.5], "extra": 2}]}
    ).cells[0]
    # a closed-loop cell is written without request_rate, as before open-loop cells; an open-loop one with it
    assert set(cell.to_dict()) == {*BASELINE_COLUMNS, "per_position_floors"} - {"request_rate"}
    cell.request_rate = 4.0
    assert cell.to_dict()["request_rate"] == 4.0


def test_manifest_fields_and_facts():
    m = Manifest.from_dict(
        {
            "run_id": "r",
            "status": "running",
            "planned_cells": ["a", "b"],
            "owner": {"pid": 7, "pid_start_ticks": 3, "hostname": "h"},
            "provenance": {"git_sha": "abc", "hardware": {"device": "cpu", "cpu": "EPYC"}},
            "recipe": {"verifier": {"standin": "kimi-k2.5"}},
            "drafts": {"d": {"path": "/d", "content_hash": {"sha256": "ff"}, "method": "eagle3"}},
            "suites": {"chat": {"source": "builtin:chat"}},
        }
    )
    assert (m.run_id, m.status, m.planned_cells) == ("r", "running", ["a", "b"])
    assert m.owner is not None and (m.owner.pid, m.owner.hostname) == (7, "h")
    assert m.git_sha == "abc" and m.hardware.describe() == "cpu — EPYC"
    assert m.standin == "kimi-k2.5" and m.suite_sources == {"chat": "builtin:chat"}
    assert m.drafts["d"].content_hash == "ff" and m.drafts["d"].method == "eagle3"  # older {"sha256": ...} form
    killed = m.with_status("interrupted", "its process is gone")
    assert (killed.status, killed.recorded_status, killed.data["status"]) == ("interrupted", "running", "interrupted")


def test_every_row_column_is_documented_in_the_table_docstring():
    """results/table.py's docstring lists the columns for users of results.parquet; a field of
    CellRow it does not name is a column nobody can look up. Breakdowns are named by pattern
    (<what>_buckets / segments / k_sweep, al_by_<what>[_ci_low|_ci_high], drafts_by_<what>)."""
    import harness.results.table as table

    doc = table.__doc__ or ""
    by_pattern = [
        f"{c}_by_{b}{e}"
        for b in table.BREAKDOWNS
        for c, e in (("al", ""), ("al", "_ci_low"), ("al", "_ci_high"), ("drafts", ""))
    ]
    by_pattern += ["output_position_buckets", "prompt_length_buckets"]
    undocumented = [f.name for f in fields(CellRow) if f.name not in doc and f.name not in by_pattern]
    assert undocumented == [], undocumented
