"""The step-cost line: speedup at every k from two measured ks (harness/analysis/k_speedup.py)."""

from __future__ import annotations

import pytest

from harness.analysis.k_speedup import MeasuredK, best_k, speedup_by_k, step_cost_line


def _arm(k: int, tps: float, a: float, s: float, rel_ci: float = 0.0) -> MeasuredK:
    x = tps / (a + s * k)
    return MeasuredK(k, tps, x, x * (1 - rel_ci), x * (1 + rel_ci))


def test_line_through_two_points_recovers_cost():
    assert step_cost_line([(3, 1.4), (8, 1.9)]) == pytest.approx((1.1, 0.1))
    assert step_cost_line([(3, 1.4)]) is None
    assert step_cost_line([(3, 1.4), (3, 1.5)]) is None


def test_speedup_at_an_unmeasured_k_follows_the_line():
    # cost 1.1 + 0.1 k: at k = 5 with 4.0 tokens per step the speedup is 4.0 / 1.6 = 2.5
    measured = [_arm(3, 3.0, 1.1, 0.1), _arm(8, 4.5, 1.1, 0.1)]
    est = {e.k: e for e in speedup_by_k(measured, {1: 1.8, 3: 3.0, 5: 4.0, 8: 4.5})}
    assert est[5].speedup == pytest.approx(2.5) and not est[5].measured
    assert est[1].speedup == pytest.approx(1.8 / 1.2)
    assert est[3].measured and est[3].speedup == pytest.approx(3.0 / 1.4)
    # without CI width the interval is the point
    assert est[5].speedup_low == pytest.approx(2.5) == est[5].speedup_high


def test_interval_widens_with_the_measured_cis_and_holds_the_point():
    measured = [_arm(3, 3.0, 1.1, 0.1, 0.05), _arm(8, 4.5, 1.1, 0.1, 0.05)]
    e5 = next(e for e in speedup_by_k(measured, {5: 4.0}) if e.k == 5)
    assert e5.speedup_low < 2.5 < e5.speedup_high


def test_one_measured_k_estimates_nothing():
    assert speedup_by_k([_arm(8, 4.5, 1.1, 0.1)], {3: 3.0, 8: 4.5}) == []


def test_best_k_names_the_ks_it_cannot_tell_apart():
    measured = [_arm(2, 2.5, 1.0, 0.15, 0.02), _arm(8, 3.6, 1.0, 0.15, 0.02)]
    est = speedup_by_k(measured, {1: 1.8, 2: 2.5, 3: 2.95, 4: 3.2, 8: 3.6})
    best, open_ = best_k(est)  # type: ignore[misc]
    by_k = {e.k: e.speedup for e in est}
    assert best == max(by_k, key=lambda k: by_k[k]) == 3
    assert 1 not in open_ and 4 in open_
    assert best_k([]) is None
