"""The statistics now taken from scipy (issue 29 item 5), pinned against references that do not
go through scipy: the normal quantiles against the standard library's NormalDist, and the seeded
repeat bootstrap (harness/analysis/load.py) against the index draw it replaced. The distribution
test's statistics: tests/analysis/test_lossless_sampling.py; the AL bootstrap: tests/test_metrics.py."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist

import numpy as np
import pytest

from harness.analysis import load, power
from harness.analysis.load import ArmRepeat
from harness.metrics import bootstrap_ci

PHI = NormalDist()


# ---- normal quantiles and the SE of a mean


def test_normal_quantiles_and_standard_error():
    assert power.z(0.975) == pytest.approx(1.959963984540054, rel=1e-14)
    assert power.z(0.95) == pytest.approx(1.6448536269514722, rel=1e-14)
    assert power.z(0.8) == pytest.approx(0.8416212335729143, rel=1e-14)
    for q in (0.001, 0.3, 0.6, 0.999):
        assert power.z(q) == pytest.approx(PHI.inv_cdf(q), rel=1e-12)
    xs = [3.1, 2.6, 3.5, 2.2, 3.8, 2.9, 3.3, 2.4]
    al, se, n = power.se_from_per_request_al(xs)
    assert (al, n) == (pytest.approx(statistics.fmean(xs), rel=1e-15), 8)
    assert se == pytest.approx(statistics.stdev(xs) / math.sqrt(8), rel=1e-14)
    assert power.se_from_ci(2.5, 3.5) == pytest.approx(1.0 / (2 * 1.959963984540054), rel=1e-14)


# ---- bootstraps: seeded values must not move


def test_repeat_bootstrap_is_the_seeded_index_draw_it_replaced():
    base = [ArmRepeat(960, w) for w in (10.0, 10.4, 9.8, 10.9, 10.1)]
    spec = [ArmRepeat(940 + 10 * i, w) for i, w in enumerate((5.6, 5.2, 5.9, 5.5, 5.0))]
    idx = np.random.default_rng(11).integers(0, 5, size=(300, 5))
    bt, bw, st, sw = (
        np.asarray([getattr(r, f) for r in arm], dtype=float)[idx].sum(axis=1)
        for arm in (base, spec)
        for f in ("output_tokens", "wall_s")
    )
    assert np.array_equal(load.speedup_replicates(base, spec, 300, seed=11), (st / sw) / (bt / bw))
    assert len(load.speedup_replicates(base, spec, 0)) == 0


def test_seeded_cis_do_not_move():
    base = [ArmRepeat(960, w) for w in (10.0, 10.4, 9.8, 10.9, 10.1)]
    spec = [ArmRepeat(960, w) for w in (5.6, 5.2, 5.9, 5.5, 5.0)]
    est = load.speedup_ci(base, spec, seed=3)
    assert (est.low, est.high) == pytest.approx((1.7491166077738518, 2.0038610038610036), rel=1e-12)
    lo, hi = bootstrap_ci([40, 55, 31, 62, 48, 37], [18, 20, 15, 22, 19, 16], seed=0)
    assert (lo, hi) == pytest.approx((3.2499381188118814, 3.6880268907563027), rel=1e-12)
