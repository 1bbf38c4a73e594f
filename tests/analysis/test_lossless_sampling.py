"""The T > 0 distribution test's statistics (harness/analysis/lossless_sampling.py) taken from scipy,
pinned against references that do not go through scipy: closed forms, numpy's own samplers; the
sampling-fidelity statistics by their definitions; no torch import."""

from __future__ import annotations

import math
import subprocess
import sys
from statistics import NormalDist

import numpy as np
import pytest

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
