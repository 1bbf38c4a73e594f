"""One cell against its baseline (harness/results/gate/cell_checks.py): a speedup flagged for a busy
machine never passes against a floor (the sentinel arithmetic: tests/analysis/test_machine.py)."""

from __future__ import annotations

from harness.analysis.machine import MachineReading
from harness.results.gate.cell_checks import check_cell
from harness.schema import CellRow
from harness.schema_baseline import BaselineCell


def _cell(speedup: float, flags: list[str]) -> tuple[dict, dict]:
    base = {
        "suite": "math",
        "k": 3,
        "concurrency": 4,
        "temperature": 0.0,
        "acceptance_length": 1.0,
        "per_position_rates": [],
        "speedup": 0.62,
    }
    row = {**base, "draft": "random", "speedup": speedup, "flags": flags}
    return BaselineCell.from_dict(base), CellRow.from_dict(row)


def test_gate_never_passes_a_flagged_speedup_against_a_floor():
    base, row = _cell(1.13, [MachineReading((215.0,), (467.0,), 0.03).flag()])
    check = next(c for c in check_cell(base, row, 0.05, [], min_speedup=1.0) if c.metric == "speedup")
    assert not check.passed and "unsteady machine" in check.message()
    base, row = _cell(1.13, [])
    check = next(c for c in check_cell(base, row, 0.05, [], min_speedup=1.0) if c.metric == "speedup")
    assert check.passed
