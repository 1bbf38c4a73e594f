"""harness/results/table.py: a cell is two files, written once; the tables derived from the cells are
written once when the run ends (O(cells), not a rebuild after every cell)."""

from __future__ import annotations

import json

import pytest

from harness.errors import BadInput
from harness.results.table import ensure_tables, finished_cells, rebuild_table, tables_stale, write_cell
from tests.results_fixtures import rows_for


def _rows(cid: str) -> list[dict]:
    return [{**r, "cell_id": cid} for r in rows_for("r")]


def test_a_row_the_reader_would_refuse_is_never_written(tmp_path):
    with pytest.raises(BadInput, match="run_id"):
        write_cell(tmp_path, "c1", [{"cell_id": "c1", "mode": "baseline"}])
    assert not finished_cells(tmp_path)


def test_write_cell_writes_the_cell_and_not_the_tables(tmp_path):
    for cid in ("c1", "c2", "c3"):
        write_cell(tmp_path, cid, _rows(cid), {"baseline": [], "speculative": []})
    assert finished_cells(tmp_path) == {"c1", "c2", "c3"}
    assert not (tmp_path / "results.parquet").exists() and not (tmp_path / "results.csv").exists()
    assert tables_stale(tmp_path) is not None  # a reader can tell, and ensure_tables mends it
    assert ensure_tables(tmp_path) is not None and tables_stale(tmp_path) is None
    assert ensure_tables(tmp_path) is None  # current now: nothing rewritten


def test_a_cell_after_the_tables_makes_them_stale_until_the_run_ends(tmp_path):
    write_cell(tmp_path, "c1", _rows("c1"))
    ensure_tables(tmp_path)
    before = (tmp_path / "results.parquet").read_bytes()
    write_cell(tmp_path, "c2", _rows("c2"))
    assert (tmp_path / "results.parquet").read_bytes() == before  # untouched by the write
    assert tables_stale(tmp_path) == "built from other cells"
    ensure_tables(tmp_path)
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "results.parquet")) == 4


def test_resume_rebuilds_missing_or_stale_tables(tmp_path):
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    rows = [
        {"cell_id": "c1", "mode": "baseline", "flags": [], "acceptance_length": None},
        {"cell_id": "c1", "mode": "speculative", "flags": ["x"], "acceptance_length": 2.5},
    ]
    (run / "cells" / "c1.json").write_text(json.dumps(rows))
    rebuild_table(run)
    assert tables_stale(run) is None and ensure_tables(run) is None
    csv_before = (run / "results.csv").read_bytes()
    (run / "results.csv").write_text("garbage")
    assert ensure_tables(run) == "results.csv changed since it was written"
    assert (run / "results.csv").read_bytes() == csv_before
    (run / "results.parquet").unlink()
    assert ensure_tables(run) == "results.parquet missing"
    import pandas as pd

    assert list(pd.read_parquet(run / "results.parquet")["acceptance_length"].fillna(0)) == [0, 2.5]
    (run / "cells" / "c2.json").write_text(json.dumps([{**rows[1], "cell_id": "c2"}]))  # a cell the tables lack
    assert ensure_tables(run) == "built from other cells"
    assert len(pd.read_parquet(run / "results.parquet")) == 3
