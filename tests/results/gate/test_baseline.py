"""A baseline folder (harness/results/gate/baseline.py): its format, a half-written one refused, and one
set of cells per verifier: the CPU stand-in is another verifier where the CPU computes bf16 natively
and where it does not (harness/hardware.py), and one committed baseline gates both. An update
replaces only its run's verifier's cells."""

from __future__ import annotations

import json

import pytest

from harness.errors import BadInput
from harness.provenance import atomic_write_json
from harness.results.gate.baseline import _other_verifiers_cells, read_baseline
from harness.results.gate.evaluate import cells_for_run_verifiers
from harness.schema import CellRow
from harness.schema_baseline import BASELINE_COLUMNS, BaselineFile


def _cell(vh: str, al: float) -> dict:
    return {"suite": "code", "k": 3, "concurrency": 4, "temperature": 0.0, "verifier_hash": vh, "acceptance_length": al}


def test_the_run_is_gated_against_its_own_verifiers_cells():
    baseline = BaselineFile.from_dict(
        {"format": 1, "tolerance": 0.05, "cells": [_cell("standin:bf16", 3.1), _cell("standin:fp32", 2.9)]}
    )
    picked = cells_for_run_verifiers(baseline, [CellRow.from_dict({"verifier_hash": "standin:fp32"})])
    assert [c.acceptance_length for c in picked.cells] == [2.9] and picked.tolerance == 0.05
    # none of the run's verifiers: the baseline stays whole, so the gate reports the mismatch
    assert cells_for_run_verifiers(baseline, [CellRow.from_dict({"verifier_hash": "other"})]) == baseline


def test_an_update_keeps_the_other_verifiers_cells(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"cells": [_cell("standin:bf16", 3.1), _cell("standin:fp32", 2.9)]}))
    kept = _other_verifiers_cells(path, {"standin:fp32"})
    assert [c.verifier_hash for c in kept] == ["standin:bf16"]
    assert _other_verifiers_cells(tmp_path / "none.json", {"x"}) == []


def test_a_baseline_of_another_verifier_only_is_named_not_used(tmp_path):
    """The main job on a CPU whose stand-in is another verifier than the committed baseline's: it
    says so and how to add this verifier's cells, instead of failing a run that did its work."""
    from harness.results.gate.baseline import other_verifier_only, update_baseline
    from harness.results.runs import read_run
    from tests.results_fixtures import make_run

    base_run = make_run(tmp_path / "runs", "bf16", [{"verifier_hash": "standin:bf16"}])
    run = make_run(tmp_path / "runs", "fp32", [{"verifier_hash": "standin:fp32"}])
    folder = update_baseline(base_run, tmp_path / "baseline")
    assert other_verifier_only(folder, read_run(run)) == "standin:bf16"
    assert other_verifier_only(folder, read_run(base_run)) is None
    update_baseline(run, folder)  # adds this verifier's cells, keeps the others
    assert other_verifier_only(folder, read_run(run)) is None
    hashes = {c["verifier_hash"] for c in json.loads((folder / "baseline.json").read_text())["cells"]}
    assert hashes == {"standin:bf16", "standin:fp32"}


def test_baseline_folder_format(runs):
    ref, base_dir, _ = runs
    data = json.loads((base_dir / "baseline.json").read_text())
    assert data["format"] == 1 and data["source_run_id"] == "ref" and data["tolerance"] == 0.05
    assert json.loads((base_dir / "manifest.json").read_text())["run_id"] == "ref"
    cell = data["cells"][0]
    assert set(BASELINE_COLUMNS) - {"request_rate"} | {"per_position_floors"} == set(cell)  # closed loop
    assert cell["acceptance_length"] == pytest.approx(2.85)
    assert cell["per_position_floors"] == pytest.approx([0.76, 0.57, 0.4275])


def test_half_written_baseline_is_refused(runs):
    _, base_dir, _ = runs
    atomic_write_json(base_dir / "manifest.json", {"run_id": "someone-else"})
    with pytest.raises(BadInput, match="disagree"):
        read_baseline(base_dir)
