"""Speedups run to run (harness/analysis/between_runs.py): the between-run SD a rerun adds beyond one
run's own CI, the widened CI, and the rerun-agreement check of issue 52."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.between_runs import Z95, Speedup, agree, between_run_sd, rerun_z, widened


def _ci(value: float, se: float) -> Speedup:
    return Speedup(value, value * math.exp(-Z95 * se), value * math.exp(Z95 * se))


def test_log_se_is_read_back_from_a_95_ci():
    assert _ci(1.5, 0.04).log_se == pytest.approx(0.04)
    assert Speedup(1.5).log_se == 0.0  # no CI: nothing within the run


def _simulated_runs(tau: float, se: float, cells: int, runs: int, seed: int) -> dict[str, list[Speedup]]:
    """Each cell's true speedup, then per run an engine-start effect (SD tau) and the run's own
    request noise (SD se), reported with the run's own CI (which knows only se)."""
    rng = np.random.default_rng(seed)
    out = {}
    for c in range(cells):
        true = math.log(0.6 + 1.4 * rng.random())
        logs = true + rng.normal(0, tau, runs) + rng.normal(0, se, runs)
        out[str(c)] = [_ci(math.exp(x), se) for x in logs]
    return out


def test_between_run_sd_recovers_the_engine_start_spread_beyond_the_runs_own_error():
    got = between_run_sd(_simulated_runs(tau=0.06, se=0.02, cells=30, runs=10, seed=1))
    assert got is not None and (got.cells, got.runs) == (30, 10)
    assert got.tau == pytest.approx(0.06, rel=0.2)


def test_no_spread_beyond_the_runs_own_ci_reads_as_zero_not_negative():
    got = between_run_sd(_simulated_runs(tau=0.0, se=0.05, cells=30, runs=10, seed=2))
    assert got is not None and got.tau < 0.02


def test_a_cell_seen_once_says_nothing():
    assert between_run_sd({"a": [_ci(1.2, 0.01)]}) is None


def test_widening_adds_the_between_run_sd_in_quadrature_on_the_log_scale():
    s = widened(_ci(2.0, 0.03), 0.04)
    assert s.value == 2.0 and s.log_se == pytest.approx(0.05)
    point = widened(Speedup(0.65), 0.05)  # a CI collapsed to a point (an untrained draft) opens up
    assert point.low is not None and point.low < 0.65 < point.high
    assert widened(_ci(2.0, 0.03), 0.0) == _ci(2.0, 0.03)


def test_reruns_that_move_beyond_their_own_cis_disagree_until_widened():
    """The issue's pair: 0.61x [0.61, 0.62] then 0.68x [0.65, 0.71] (z ~ 4) disagree on their own CIs;
    with an 8 % between-run SD they agree."""
    a, b = Speedup(0.61, 0.61, 0.62), Speedup(0.68, 0.65, 0.71)
    assert rerun_z(a, b) > 4 and not agree(a, b)
    assert agree(widened(a, 0.08), widened(b, 0.08))


def test_point_speedups_with_no_ci_agree_only_when_equal():
    assert not agree(Speedup(0.65), Speedup(0.66))
    assert agree(Speedup(0.65), Speedup(0.65))


def test_widened_cis_hold_on_reruns_where_own_cis_do_not():
    """Simulated reruns with an engine-start spread 3x the runs' own error: consecutive pairs agree
    far below 95 % on their own CIs and near 95 % once widened by the SD estimated from other runs."""
    runs = _simulated_runs(tau=0.06, se=0.02, cells=40, runs=12, seed=3)
    own = wide = n = 0
    for i in range(11):
        others = {c: [s for j, s in enumerate(v) if j not in (i, i + 1)] for c, v in runs.items()}
        tau = between_run_sd(others).tau
        for v in runs.values():
            n += 1
            own += agree(v[i], v[i + 1])
            wide += agree(widened(v[i], tau), widened(v[i + 1], tau))
    assert own / n < 0.6
    assert wide / n >= 0.9
