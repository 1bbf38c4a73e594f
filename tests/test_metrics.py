"""The AL bootstrap (harness/metrics.py bootstrap_ci): the plain paired percentile bootstrap, within the
randrange CIs it replaced (the committed baselines' CIs were made by that loop and stay as historic
values), and refused below two requests that drafted."""

from __future__ import annotations

import numpy as np
import pytest

from harness.metrics import bootstrap_ci


def _numpy_bootstrap(acc, drafts, num_resamples, seed, level=0.95):
    """A paired percentile bootstrap of the pooled AL written with numpy alone: whole requests drawn
    by one seeded generator, the pooled AL of each resample, its percentiles."""
    a, d = np.asarray(acc, dtype=float), np.asarray(drafts, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(num_resamples, len(a)))
    stats = 1.0 + a[idx].sum(axis=1) / d[idx].sum(axis=1)
    alpha = (1 - level) / 2 * 100
    return float(np.percentile(stats, alpha)), float(np.percentile(stats, 100 - alpha))


def _randrange_bootstrap(acc, drafts, num_resamples, seed, level=0.95):
    """The seeded random.Random loop the committed baselines' AL CIs were made with (before scipy)."""
    import random

    rng = random.Random(seed)
    stats = []
    for _ in range(num_resamples):
        sample = [rng.randrange(len(acc)) for _ in acc]
        stats.append(1.0 + sum(acc[i] for i in sample) / sum(drafts[i] for i in sample))
    alpha = (1 - level) / 2 * 100
    return float(np.percentile(stats, alpha)), float(np.percentile(stats, 100 - alpha))


def _requests(n: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(n)
    return rng.integers(0, 400, n).tolist(), rng.integers(100, 200, n).tolist()


@pytest.mark.parametrize("n, seed", [(2, 0), (5, 7), (37, 1), (240, 3)])
def test_al_bootstrap_is_the_plain_paired_percentile_bootstrap(n, seed):
    """bootstrap_ci (scipy.stats.bootstrap, paired) resamples whole requests exactly as the numpy
    loop does: the same CI to the last bit, at production size (240 requests) included."""
    acc, drafts = _requests(n)
    assert bootstrap_ci(acc, drafts, num_resamples=500, seed=seed) == _numpy_bootstrap(acc, drafts, 500, seed)
    assert bootstrap_ci(acc, drafts, seed=seed) == bootstrap_ci(acc, drafts, seed=seed)  # seeded


@pytest.mark.parametrize("n", [8, 16, 64, 240])
def test_al_bootstrap_stays_within_the_randrange_cis_it_replaced(n):
    """Another generator draws other resamples: the ends move by Monte Carlo noise only, a small
    share of the interval's width, and the pooled AL stays inside both."""
    acc, drafts = _requests(n)
    old, new = _randrange_bootstrap(acc, drafts, 2000, 0), bootstrap_ci(acc, drafts)
    assert new is not None
    width = old[1] - old[0]
    assert abs(new[0] - old[0]) < 0.1 * width and abs(new[1] - old[1]) < 0.1 * width, (old, new)
    al = 1 + sum(acc) / sum(drafts)
    assert old[0] < al < old[1] and new[0] < al < new[1]


def test_al_bootstrap_needs_two_requests_that_drafted():
    assert bootstrap_ci([3, 4], [2, 0]) is None and bootstrap_ci([], []) is None
    assert bootstrap_ci([5, 5], [2, 2]) == (3.5, 3.5)  # every resample the same: a zero-width CI
