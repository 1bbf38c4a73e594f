"""The crossover checks (harness/results/gate/crossover_checks.py): a run's crossover concurrency held to
its baseline's requirement, and a baseline that never paid or states no requirement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.gate.baseline import gate, update_baseline
from tests.results_fixtures import invoke, make_run


def _load_run(root: Path, run_id: str, speedups: list[float]) -> Path:
    """One suite and k over concurrencies 1, 2, 4, 8 with these speedups (baseline 100 tok/s)."""
    return make_run(root, run_id, [dict(c=c, spec_tok_s=100.0 * s) for c, s in zip((1, 2, 4, 8), speedups)])


def test_gate_holds_the_crossover_concurrency_to_the_baselines_requirement(tmp_path):
    ref = _load_run(tmp_path, "ref", [1.8, 1.4, 1.1, 0.8])  # crosses at 2 ** (2 + 0.1/0.3) = 5.04
    base_dir = tmp_path / "base"
    update_baseline(ref, base_dir, tolerance=0.05, max_crossover_drop=0.25)
    stored = json.loads((base_dir / "baseline.json").read_text())
    assert stored["max_crossover_drop"] == 0.25
    assert [(c["suite"], c["k"], c["where"]) for c in stored["crossovers"]] == [("chat", 3, "crosses")]
    assert stored["crossovers"][0]["crossover"] == pytest.approx(2 ** (2 + 0.1 / 0.3))

    def crossover_check(run):
        res = gate(run, base_dir)
        return res, next(c for c in res.checks if c.metric == "crossover concurrency")

    res, check = crossover_check(_load_run(tmp_path, "near", [1.8, 1.4, 1.05, 0.8]))  # 2 ** 2.2 = 4.59
    assert check.passed and check.value == pytest.approx(2**2.2) and check.bound == pytest.approx(0.75 * 2 ** (7 / 3))
    assert res.exit_code == 0
    res, check = crossover_check(_load_run(tmp_path, "above", [1.8, 1.4, 1.3, 1.1]))  # pays up to c = 8
    assert check.passed and check.value == 8
    res, check = crossover_check(_load_run(tmp_path, "worse", [1.5, 1.05, 0.9, 0.7]))  # 2 ** (1 + 1/3) = 2.52
    assert not check.passed and res.exit_code == 1 and check.value == pytest.approx(2 ** (4 / 3))
    assert "crossover concurrency" in res.summary() and "c=all" in res.summary()
    worse = tmp_path / "worse"
    code, _, _ = invoke(["gate", worse, "--baseline", base_dir])
    assert code == 1
    code, out, _ = invoke(["gate", worse, "--baseline", base_dir, "--max-crossover-drop", "0.6"])
    assert code == 0 and "crossover concurrency" in out
    code, _, err = invoke(["gate", worse, "--baseline", base_dir, "--max-crossover-drop", "1.5"])
    assert code == 2 and "--max-crossover-drop" in str(err)


def test_a_baseline_that_never_paid_holds_no_crossover_and_one_without_the_requirement_is_not_checked(tmp_path):
    never = _load_run(tmp_path, "never", [0.9, 0.8, 0.7, 0.6])
    update_baseline(never, tmp_path / "b1", max_crossover_drop=0.25)
    res = gate(_load_run(tmp_path, "r1", [0.5, 0.5, 0.5, 0.5]), tmp_path / "b1")
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]
    update_baseline(_load_run(tmp_path, "pays", [1.8, 1.4, 1.1, 0.8]), tmp_path / "b2")
    res = gate(_load_run(tmp_path, "r2", [1.5, 1.05, 0.9, 0.7]), tmp_path / "b2")
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]  # no requirement stored
