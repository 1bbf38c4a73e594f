"""harness/schema_baseline.py: baseline.json read back as the types it was written from, a baseline cell with only the
columns a gate reads."""

from __future__ import annotations

import json

import pytest

from harness.paths import REPO_ROOT as REPO
from harness.results.gate.baseline import read_baseline
from harness.schema_baseline import BASELINE_COLUMNS, BaselineFile
from tests.results_fixtures import rows_for


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
