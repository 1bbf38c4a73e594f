"""harness/schema.py: rows read back as the types they were written from, run folders of older
versions still load (issue 29), cell files carry their format and the published JSON schema of a cell
is current (issue 55). Baselines: tests/test_schema_baseline.py; manifests: tests/test_schema_manifest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.results.runs import read_run
from harness.results.table import read_cell, write_cell
from harness.schema import BREAKDOWNS, CellFile, CellRow, cell_json_schema, flat_columns
from tests.results_fixtures import make_run, rows_for, run_frame

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
    (old / "cells" / f"{spec.cell_id}.json").write_text(json.dumps(written))  # format 1: a bare list
    loaded = next(r for r in read_run(old).rows if r.is_speculative)
    assert loaded.machine_foreign_cpu is None and loaded.itl_per_token_ms_p99 is None
    assert not loaded.breakdowns.k and loaded.machine_sentinels_baseline == []
    assert loaded.acceptance_length == pytest.approx(spec.acceptance_length)
    assert not hasattr(loaded, "a_future_column")


def test_every_row_column_is_documented_in_the_table_docstring():
    """results/table.py's docstring lists the columns for users of results.parquet; a field of
    CellRow it does not name is a column nobody can look up. Breakdowns are named by pattern
    (<what>_buckets / segments / k_sweep, al_by_<what>[_ci_low|_ci_high], drafts_by_<what>)."""
    import harness.results.table as table

    doc = table.__doc__ or ""
    by_pattern = [c for what in BREAKDOWNS for c in flat_columns(what)]
    undocumented = [c for c in CellRow.flat_columns() if c not in doc and c not in by_pattern]
    assert undocumented == [], undocumented


def _think_row() -> dict:
    row = rows_for("r", c=4)[1]
    row.update(
        segments=["thinking", "answer"],
        al_by_segment=[2.0, 3.0],
        al_by_segment_ci_low=[1.8, 2.8],
        al_by_segment_ci_high=[2.2, 3.2],
        drafts_by_segment=[40, 60],
    )
    return row


def test_a_format_1_cell_reads_its_breakdowns_as_typed_buckets_and_the_tables_keep_the_flat_columns(tmp_path):
    """Format 1 (a bare list of flat rows, parallel breakdown lists) goes through one converter;
    rewritten, the cell is format 2 and reads back the same rows; results.parquet keeps the flat
    columns users load."""
    folder = make_run(tmp_path, "r", [dict(c=4)])
    cid = _think_row()["cell_id"]
    path = folder / "cells" / f"{cid}.json"
    path.write_text(json.dumps([rows_for("r", c=4)[0], _think_row()]))
    old = read_cell(path)
    seg = old[1].breakdowns.segment
    assert seg.labels == ["thinking", "answer"] and seg.drafts == [40, 60]
    assert seg.measured()[0] == ("thinking", 2.0, 1.8, 2.2, 40)
    write_cell(folder, cid, old)
    assert json.loads(path.read_text())["format"] == 2
    assert read_cell(path) == old
    _, df, _ = run_frame(folder)
    spec = df[df["mode"] == "speculative"].iloc[0]
    assert list(spec["segments"]) == ["thinking", "answer"] and list(spec["al_by_segment"]) == [2.0, 3.0]
    assert list(df.columns) == CellRow.flat_columns()
    assert CellRow.from_dict(_think_row()).to_dict()["drafts_by_segment"] == [40, 60]


def test_a_cell_format_this_version_does_not_know_is_refused_in_one_line(tmp_path):
    path = tmp_path / "cells" / "x.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"format": 99, "rows": [{"anything": 1}]}))
    with pytest.raises(BadInput, match="cell format 99") as e:
        read_cell(path)
    assert "\n" not in str(e.value) and "harness version that wrote it" in str(e.value)
    path.write_text('{"format": 2, "rows": [')  # torn
    with pytest.raises(BadInput, match="unreadable cell file"):
        read_cell(path)


def test_the_published_cell_schema_is_current():
    """docs/cell.schema.json is CellFile.model_json_schema(); regenerate it with
    `.venv/bin/python -m harness.schema > docs/cell.schema.json`."""
    published = (REPO / "docs" / "cell.schema.json").read_text()
    assert published == cell_json_schema(), "docs/cell.schema.json is stale: .venv/bin/python -m harness.schema > it"
    schema = json.loads(published)
    assert schema["properties"]["format"]["const"] == 2
    assert "breakdowns" in schema["$defs"]["CellRow"]["properties"]
    CellFile.model_validate({"rows": [CellRow.from_dict(_think_row()).model_dump()]})  # a row validates
