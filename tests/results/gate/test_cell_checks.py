"""One cell against its baseline (harness/results/gate/cell_checks.py): the checks with literal numbers,
the noise-aware bound counting the baseline's noise too, and a speedup flagged for a busy machine never
passing against a floor (the sentinel arithmetic: tests/analysis/test_machine.py)."""

from __future__ import annotations

import math

import pytest

from harness.analysis.machine import MachineReading
from harness.results.gate.cell_checks import check_cell, noise_slack
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


def test_check_cell_literal_numbers():
    base = {
        "suite": "s",
        "k": 2,
        "concurrency": 1,
        "temperature": 0.0,
        "acceptance_length": 2.0,
        "per_position_rates": [0.6, 0.4],
        "speedup": 1.5,
    }
    row = {"acceptance_length": 1.9, "per_position_rates": [0.6, 0.3], "speedup": 1.1}
    checks = check_cell(BaselineCell.from_dict(base), CellRow.from_dict(row), 0.1, [0.54, 0.36], min_speedup=1.2)
    assert [c.metric for c in checks] == [
        "acceptance_length",
        "per_position_rate[1]",
        "per_position_rate[2]",
        "speedup",
    ]
    assert [c.passed for c in checks] == [True, True, False, False]
    assert checks[0].bound == pytest.approx(1.8)


def test_noise_aware_counts_the_baselines_noise_too():
    """The demo's case (session 23): a code cell whose per-position rate fell 7 % on 8 prompts, the
    baseline itself an 8-prompt estimate. Point values fail it; noise-aware adds the run's and the
    baseline's CI half-widths in quadrature, so it passes, while a real drop still fails."""
    base = BaselineCell.from_dict(
        {
            "suite": "code",
            "k": 3,
            "concurrency": 4,
            "temperature": 0.0,
            "acceptance_length": 2.587,
            "al_ci_high": 2.947,
            "per_position_rates": [0.670, 0.503, 0.413],
        }
    )
    floors = [x * 0.95 for x in [0.670, 0.503, 0.413]]

    def run(al, hi, rates):
        row = CellRow.from_dict({"acceptance_length": al, "al_ci_high": hi, "per_position_rates": rates})
        return check_cell(base, row, 0.05, floors, noise_aware=True), check_cell(base, row, 0.05, floors)

    aware, point = run(2.559, 2.87, [0.622, 0.508, 0.428])
    assert not point[1].passed and all(c.passed for c in aware)
    assert aware[1].compared == pytest.approx(0.622 + math.hypot(2.87 - 2.559, 2.947 - 2.587))
    # an untrained draft: AL 1.4 with a tight CI fails the AL and first positions' checks however
    # noisy the baseline (the AL's slack is wide for the last, rarest position)
    aware, _ = run(1.4, 1.5, [0.25, 0.1, 0.05])
    assert [c.passed for c in aware[:3]] == [False, False, False]
    # the baseline's noise alone does not excuse a run without a CI: its point value is held
    assert noise_slack(2.4, None, 2.587, 2.947) == 0.0
    assert noise_slack(2.4, 2.6, 2.587, None) == pytest.approx(0.2)
