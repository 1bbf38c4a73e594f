"""The statistics now taken from scipy (issue 29 item 5), pinned against references that do not
go through scipy: closed forms, the standard library's NormalDist, numpy's own samplers, and the
seeded values they give (new runs' CIs are made with those; the AL CIs stored in committed baselines
were made by the random.Random loop they replaced and stay as historic values)."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from statistics import NormalDist

import numpy as np
import pytest

from harness.analysis import load, power
from harness.analysis.load import ArmRepeat
from harness.analysis.lossless_sampling import (
    SampledToken,
    chi2_isf,
    chi2_sf,
    detectable_noncentrality,
    ks_sf,
    ncx2_sf,
    randomized_pit,
    sampling_fidelity,
)
from harness.metrics import bootstrap_ci

PHI = NormalDist()


# ---- chi-square: closed forms for 1 and 2 degrees of freedom


def test_chi2_tails_match_closed_forms():
    assert chi2_sf(3.84, 1) == pytest.approx(0.05, abs=2e-4)
    for x in (0.01, 0.5, 3.841459, 10.0, 30.0):
        assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-12)  # P(|Z| > sqrt x)
        assert chi2_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-12)
    for q in (0.5, 0.05, 0.01, 1e-6):
        assert chi2_isf(q, 2) == pytest.approx(-2 * math.log(q), rel=1e-12)
        assert chi2_isf(q, 1) == pytest.approx(PHI.inv_cdf(1 - q / 2) ** 2, rel=1e-10)
    assert chi2_sf(0.0, 3) == 1.0 and chi2_sf(-1.0, 3) == 1.0


def test_noncentral_chi2_with_one_df_is_a_shifted_normal_squared():
    for x, nc in ((3.84, 0.0), (3.84, 7.85), (1.0, 2.5), (20.0, 9.0)):
        mu, r = math.sqrt(nc), math.sqrt(x)
        assert ncx2_sf(x, 1, nc) == pytest.approx(PHI.cdf(mu - r) + PHI.cdf(-mu - r), rel=1e-10)


def test_ncx2_power_at_the_detectable_noncentrality_is_the_target_power():
    for df in (1, 2, 4, 9, 19, 49):
        lam = detectable_noncentrality(df, 0.05, 0.8)
        assert ncx2_sf(chi2_isf(0.05, df), df, lam) == pytest.approx(0.8, abs=1e-10)
    # one df: the two-sided z test, power = Phi(sqrt(lam) - z_.975) + Phi(-sqrt(lam) - z_.975)
    lam, z = detectable_noncentrality(1, 0.05, 0.8), PHI.inv_cdf(0.975)
    assert PHI.cdf(math.sqrt(lam) - z) + PHI.cdf(-math.sqrt(lam) - z) == pytest.approx(0.8, abs=1e-10)
    # the values the Poisson-mixture bisection gave (it agreed to ~1e-8)
    assert detectable_noncentrality(9, 0.05, 0.8) == pytest.approx(15.649797895188, rel=1e-9)
    assert detectable_noncentrality(4, 0.05, 0.8) == pytest.approx(11.935285837705, rel=1e-9)
    assert detectable_noncentrality(3, 0.5, 0.4) == 0.0  # power below alpha needs no departure


def test_ncx2_power_against_numpys_noncentral_sampler():
    rng = np.random.default_rng(0)
    df, n = 9, 200_000
    lam = detectable_noncentrality(df, 0.05, 0.8)
    hits = (rng.noncentral_chisquare(df, lam, n) > chi2_isf(0.05, df)).mean()
    assert hits == pytest.approx(0.8, abs=4 * math.sqrt(0.8 * 0.2 / n))


# ---- Kolmogorov-Smirnov: exact tails, and the statistic


def test_ks_tail_matches_exact_closed_forms():
    for n in (2, 5, 40):
        for d in (1 - 0.9 / n, 1 - 0.5 / n, 1 - 0.2 / n):  # d >= max(1/2, 1 - 1/n): P(D_n > d) = 2 (1 - d)^n
            assert ks_sf(d, n) == pytest.approx(2 * (1 - d) ** n, rel=1e-9)
    for n in (3, 10):  # 1/(2n) <= d <= 1/n: P(D_n <= d) = n! (2d - 1/n)^n
        d = 0.8 / n
        assert 1 - ks_sf(d, n) == pytest.approx(math.factorial(n) * (2 * d - 1 / n) ** n, rel=1e-8)


def test_ks_tail_is_close_to_the_asymptotic_stephens_form():
    # what the hand-written ks_sf computed; the exact tail differs by < 0.025 at n >= 10
    def stephens(d: float, n: int) -> float:
        lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
        return min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))))

    for n in (10, 40, 400, 10_000):
        for d in np.linspace(0.3, 3.0, 10) / math.sqrt(n):
            assert ks_sf(float(d), n) == pytest.approx(stephens(float(d), n), abs=0.025)


def _synthetic(seed: int, n: int, vocab: int = 30, num_top: int = 4) -> list[SampledToken]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        logits = rng.normal(0.0, 2.0, vocab)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        tok = int(rng.choice(vocab, p=p))
        lps = {int(t): float(np.log(p[t])) for t in np.argsort(-p)[:num_top]}
        lps[tok] = float(np.log(p[tok]))
        out.append(SampledToken(tok, lps))
    return out


def test_sampling_fidelity_statistics_by_their_definitions():
    samples = _synthetic(3, 500)
    r = sampling_fidelity(samples, num_top=4, seed=3)
    u, _ = randomized_pit(samples, 4, seed=3)
    observed = np.bincount(np.minimum((u * 10).astype(int), 9), minlength=10)
    assert r.chi2 == pytest.approx(float(((observed - 50) ** 2 / 50).sum()), rel=1e-12)
    assert r.p_value == pytest.approx(chi2_sf(r.chi2, 9), rel=1e-12)
    x, i = np.sort(u), np.arange(1, 501)
    assert r.ks_statistic == pytest.approx(float(max((i / 500 - x).max(), (x - (i - 1) / 500).max())), rel=1e-12)
    assert r.ks_p_value == pytest.approx(ks_sf(r.ks_statistic, 500), rel=1e-12)
    assert r.min_detectable_tv == pytest.approx(math.sqrt(15.649797895188 / 500) / 2, rel=1e-9)


def test_lossless_sampling_no_longer_imports_torch():
    code = "import sys, harness.analysis.lossless_sampling as m; m.chi2_sf(1.0, 2); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


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
