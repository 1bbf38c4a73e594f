"""The paired gate (issue 52): the candidate draft against the baseline's draft, both run in the same
bench run on the same prompts, engine and machine, tested on per-request paired differences (pure: no
I/O; docs/gate.md, "Paired gate").

For a metric θ = c0 + Σx / Σd pooled over requests (AL: x = accepted draft tokens, d = drafted
steps, c0 = 1; per-position rate i: x = steps with position i accepted, c0 = 0), the statistic is
the relative difference D = θ_cand / θ_base − 1 over the request ids both arms finished. Its
linearisation (delta method) gives one paired value per request,

    ψ_i = (x_i − R·d_i) / mean(d)                    R = Σx / Σd, per arm
    u_i = ψ_cand,i / θ_base − θ_cand · ψ_base,i / θ_base²,

so D ≈ D̂ + mean(u) and SE(D̂) = sd(u) / √n: a paired t interval. The spread between prompts, which
dominates either arm's own CI, cancels in u. Verdicts, one-sided at `alpha` each way (a two-sided
1 − 2·alpha interval, 90 % by default):

    pass          CI lower end > −tolerance    non-inferiority shown (a drop of the tolerance or more
                                               passes with probability <= alpha)
    fail          CI upper end < −tolerance    a drop beyond the tolerance shown (an equal-or-better
                                               candidate fails with probability <= alpha)
    inconclusive  neither: the prompts it would take, n · (MDD / tolerance)²

A per-position rate is gated only where it is material: a position whose baseline rate is below
tolerance × the baseline's AL cannot move AL by the tolerance even if it fell to zero (AL = 1 + Σ
rates), so a relative drop there is no regression of the speed users see. It is reported with the
verdict "immaterial" and never fails the cell. Measured on SmolLM2-135M-Instruct (AL 1.13): its
position-3 rate 0.006 → 0.004 read −42 % [−60 %, −25 %] over 87 paired requests and failed a cell
whose AL rose 1.5 %.

MDD, the drop the test can see: (t_{1−alpha} + z_power) · SE, power 80 %. A cell whose MDD is at most
the tolerance passes a no-drop candidate with >= 80 % probability and fails one at twice the
tolerance with >= 80 %.

Sequential looks (`sequential_verdict`): a normal-mixture asymptotic confidence sequence
(Robbins' two-sided normal mixture with the sample SD plugged in: Waudby-Smith, Arnold, Wu, Howard &
Ramdas, "Time-uniform central limit theory and asymptotic confidence sequences", 2021):

    D̂_t ± σ̂_t · sqrt( 2 (t ρ² + 1) / (t² ρ²) · log( sqrt(t ρ² + 1) / (2·alpha) ) )

holds for every t at once with probability ~ 1 − 2·alpha, so looking after each round and stopping
on the first settled verdict keeps each error at <= alpha (asymptotically). ρ is tuned to be
tightest at the budget `max_prompts`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Verdict = Literal["pass", "fail", "inconclusive"]
MetricVerdict = Literal["pass", "fail", "inconclusive", "immaterial"]
ALPHA = 0.05  # one-sided, each way
POWER = 0.80
MIN_PAIRS = 3
# The confidence sequence plugs in the sample SD, which a handful of requests can put near 0 (two
# drafts that both accept every token of a thinking segment): no look before this many pairs.
MIN_SEQUENTIAL_LOOK = 16


@dataclass(frozen=True)
class RequestCounts:
    """One request's speculative counters, from vLLM's per-step arrays (cells/requests/)."""

    request_id: str
    drafts: int  # verify steps that carried draft tokens
    accepted: int  # draft tokens accepted
    per_pos: tuple[int, ...]  # steps whose position i (0-based) was accepted, i < k

    def scaled(self, keep: float, rng: np.random.Generator) -> RequestCounts:
        """Binomial thinning: each accepted token kept with probability `keep` (a weaker draft)."""
        return RequestCounts(
            self.request_id,
            self.drafts,
            int(rng.binomial(self.accepted, keep)),
            tuple(int(rng.binomial(x, keep)) for x in self.per_pos),
        )


def counts_of(record: Mapping[str, Any], k: int) -> RequestCounts:
    """A request's counts from its side-file record (accepted/drafted are per verify step)."""
    accepted = [int(a) for a, d in zip(record.get("accepted") or (), record.get("drafted") or (), strict=False) if d]
    key = f"{record['request_id']}#{record.get('repeat', 0)}"
    return RequestCounts(key, len(accepted), sum(accepted), tuple(sum(a > i for a in accepted) for i in range(k)))


def paired(cand: Iterable[RequestCounts], base: Iterable[RequestCounts]) -> list[tuple[RequestCounts, RequestCounts]]:
    """The requests both arms finished with drafts, paired by request id, in the candidate's order."""
    by_id = {b.request_id: b for b in base if b.drafts > 0}
    return [(c, by_id[c.request_id]) for c in cand if c.drafts > 0 and c.request_id in by_id]


def metric_arrays(pairs: Sequence[tuple[RequestCounts, RequestCounts]], metric: int) -> np.ndarray:
    """Columns x_cand, d_cand, x_base, d_base; metric -1 is AL, i >= 0 the rate at position i + 1."""

    def x(r: RequestCounts) -> int:
        return r.accepted if metric < 0 else r.per_pos[metric]

    return np.array([[x(c), c.drafts, x(b), b.drafts] for c, b in pairs], dtype=float).reshape(-1, 4)


def relative_difference(arr: np.ndarray, c0: float) -> tuple[float, float, float, np.ndarray]:
    """(θ_cand, θ_base, D̂, u): the pooled values, their relative difference and the paired
    per-request influence values u (module docstring)."""
    xc, dc, xb, db = arr.T
    rc, rb = xc.sum() / dc.sum(), xb.sum() / db.sum()
    tc, tb = c0 + rc, c0 + rb
    if tb <= 0:
        return float(tc), float(tb), math.nan, np.full(len(arr), math.nan)
    psi_c = (xc - rc * dc) / dc.mean()
    psi_b = (xb - rb * db) / db.mean()
    return float(tc), float(tb), float(tc / tb - 1.0), psi_c / tb - tc * psi_b / tb**2


def verdict_of(low: float, high: float, tolerance: float) -> Verdict:
    if low > -tolerance:
        return "pass"
    if high < -tolerance:
        return "fail"
    return "inconclusive"


@dataclass(frozen=True)
class PairedEstimate:
    """One metric of one cell: candidate vs the baseline's draft on the same requests."""

    metric: str
    candidate: float
    baseline: float
    diff: float  # relative: candidate / baseline − 1
    se: float
    low: float
    high: float
    n: int
    tolerance: float
    mdd: float  # the smallest drop the test sees at 80 % power (relative)
    verdict: MetricVerdict  # "immaterial": a rate too small to move AL by the tolerance (module docstring)
    prompts_needed: int | None  # for MDD <= tolerance, when it is not
    sequential: bool = False  # the interval is the confidence sequence's

    def line(self) -> str:
        need = f"; about {self.prompts_needed} prompts would see the tolerance" if self.prompts_needed else ""
        return (
            f"{self.metric}: {self.candidate:.3f} vs baseline draft {self.baseline:.3f}, "
            f"{self.diff:+.1%} [{self.low:+.1%}, {self.high:+.1%}] over {self.n} paired requests; "
            f"tolerance −{self.tolerance:.1%}, detectable drop {self.mdd:.1%}: {self.verdict}{need}"
        )


def _quantiles(n: int, alpha: float, power: float) -> tuple[float, float]:
    from scipy.stats import norm, t

    return float(t.ppf(1 - alpha, n - 1)), float(norm.ppf(power))


def paired_estimate(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]],
    metric: int,
    tolerance: float,
    alpha: float = ALPHA,
    power: float = POWER,
    planned_n: int | None = None,
) -> PairedEstimate | None:
    """The fixed-design paired t test of one metric (None: fewer than MIN_PAIRS pairs or no drafts);
    with `planned_n`, the requests were drawn in rounds that stopped on a look (harness/bench/sequential.py):
    the interval is then the confidence sequence's, tuned at `planned_n` pairs, which holds after the stop."""
    arr = metric_arrays(pairs, metric)
    n = len(arr)
    if n < MIN_PAIRS or arr[:, 1].sum() == 0 or arr[:, 3].sum() == 0:
        return None
    tc, tb, d, u = relative_difference(arr, 1.0 if metric < 0 else 0.0)
    if not math.isfinite(d):
        return None
    se = float(np.std(u, ddof=1) / math.sqrt(n))
    tq, zp = _quantiles(n, alpha, power)
    mdd = (tq + zp) * se
    need = math.ceil(n * (mdd / tolerance) ** 2) if tolerance > 0 and mdd > tolerance else None
    name = "acceptance_length" if metric < 0 else f"per_position_rate[{metric + 1}]"
    half = tq * se if planned_n is None else sequence_half_width(se * math.sqrt(n), n, planned_n, alpha)
    low, high = d - half, d + half
    verdict: MetricVerdict = verdict_of(low, high, tolerance)
    if metric >= 0 and not material(tb, baseline_al(pairs), tolerance):
        verdict, need = "immaterial", None
    return PairedEstimate(name, tc, tb, d, se, low, high, n, tolerance, mdd, verdict, need, planned_n is not None)


def cell_estimates(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]], k: int, tolerance: float, planned_n: int | None = None
) -> list[PairedEstimate]:
    """AL, then each per-position rate up to k, that the pairs can estimate (paired_estimate)."""
    return [e for m in range(-1, k) if (e := paired_estimate(pairs, m, tolerance, planned_n=planned_n)) is not None]


def baseline_al(pairs: Sequence[tuple[RequestCounts, RequestCounts]]) -> float:
    """The baseline draft's pooled AL over the pairs."""
    return relative_difference(metric_arrays(pairs, -1), 1.0)[1]


def material(rate_base: float, al_base: float, tolerance: float) -> bool:
    """Whether a position's baseline rate can move AL by the tolerance (module docstring)."""
    return rate_base >= tolerance * al_base


def cell_verdict(estimates: Sequence[PairedEstimate]) -> Verdict:
    """fail when any metric fails; pass when AL (the first) passes and none fails; else inconclusive."""
    if any(e.verdict == "fail" for e in estimates):
        return "fail"
    if estimates and estimates[0].verdict == "pass":
        return "pass"
    return "inconclusive"


def overall_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    vs = list(verdicts)
    if "fail" in vs:
        return "fail"
    return "inconclusive" if "inconclusive" in vs or not vs else "pass"


# ----------------------------------------------------------------------------- sequential


def mixture_rho2(planned_n: int, level_alpha: float) -> float:
    """ρ² that makes the normal-mixture boundary tightest at `planned_n` samples (two-sided level_alpha)."""
    la = -2 * math.log(level_alpha)
    return (la + math.log(la + 1)) / planned_n


def cs_half_width(sd: float, t: int, rho2: float, level_alpha: float) -> float:
    """Half-width of the two-sided normal-mixture asymptotic confidence sequence at sample t."""
    v = t * rho2 + 1
    return sd * math.sqrt(2 * v / (t * t * rho2) * math.log(math.sqrt(v) / level_alpha))


def sequence_half_width(sd: float, t: int, planned_n: int, alpha: float = ALPHA) -> float:
    """The two-sided (1 − 2·alpha) confidence sequence's half-width at sample t, tuned at `planned_n`."""
    return cs_half_width(sd, t, mixture_rho2(max(planned_n, 1), 2 * alpha), 2 * alpha)


@dataclass(frozen=True)
class SequentialResult:
    verdict: Verdict
    n_used: int
    looks: int
    estimate: float
    low: float
    high: float


def look(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]],
    tolerance: float,
    planned_n: int,
    alpha: float = ALPHA,
    metric: int = -1,
    looks: int = 1,
) -> SequentialResult | None:
    """One look of the confidence sequence tuned at `planned_n` pairs, at all `pairs` so far (the
    `looks`-th); None while there is nothing to look at (fewer than two pairs, or no drafts)."""
    arr = metric_arrays(pairs, metric)
    t = len(arr)
    if t < 2 or arr[:, 1].sum() == 0 or arr[:, 3].sum() == 0:
        return None
    _, _, d, u = relative_difference(arr, 1.0 if metric < 0 else 0.0)
    if not math.isfinite(d):
        return None
    h = sequence_half_width(float(np.std(u, ddof=1)), t, planned_n, alpha)
    return SequentialResult(verdict_of(d - h, d + h, tolerance), t, looks, d, d - h, d + h)


def first_look(planned_n: int, round_size: int) -> int:
    """Pairs before the first look: a round, and MIN_SEQUENTIAL_LOOK (or the whole budget if smaller)."""
    return max(round_size, min(MIN_SEQUENTIAL_LOOK, planned_n))


def sequential_verdict(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]],
    tolerance: float,
    round_size: int,
    max_prompts: int | None = None,
    alpha: float = ALPHA,
    metric: int = -1,
) -> SequentialResult:
    """Looks after each round of `round_size` pairs (in the given order) at the confidence sequence
    and stops at the first settled verdict, or at `max_prompts` (default: all pairs) inconclusive."""
    budget = min(len(pairs), max_prompts or len(pairs))
    looks, res = 0, SequentialResult("inconclusive", 0, 0, math.nan, -math.inf, math.inf)
    for t in range(first_look(budget, round_size), budget + round_size, round_size):
        t = min(t, budget)
        seen = look(pairs[:t], tolerance, budget, alpha, metric, looks + 1)
        if seen is None:
            continue
        looks, res = looks + 1, seen
        if res.verdict != "inconclusive" or t >= budget:
            break
    return res
