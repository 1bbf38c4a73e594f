"""The paired gate (issue 52): the candidate draft against the baseline's draft, both run in the same
bench run on the same prompts, engine and machine, tested on per-request paired differences (pure: no
I/O; docs/gate.md, "Paired gate").

For a metric θ = c0 + Σx / Σd pooled over requests (AL: x = accepted draft tokens, d = drafted
steps, c0 = 1; per-position rate i: x = steps with position i accepted, c0 = 0), the statistic is
the relative difference D = θ_cand / θ_base − 1 over the request ids both arms finished. Its
linearisation (delta method) gives one paired value per request,

    ψ_i = (x_i − R·d_i) / mean(d)                    R = Σx / Σd, per arm
    u_i = ψ_cand,i / θ_base − θ_cand · ψ_base,i / θ_base²,

so D ≈ D̂ + mean(u) and SE(D̂) = sd(u) / √n: a paired t interval, skew-corrected (`interval`). The
spread between prompts, which dominates either arm's own CI, cancels in u. Verdicts, one-sided at
`alpha` each way (a two-sided 1 − 2·alpha interval, 90 % by default):

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

Sequential looks (`sequential_verdict`, and the bench's rounds): a group-sequential test with
Lan–DeMets error spending of the Pocock type (Lan & DeMets 1983, "Discrete sequential boundaries for
clinical trials"; Jennison & Turnbull, "Group Sequential Methods", 2000, ch. 7):

    Z_j = (D̂_j + tolerance) / SE_j          at the j-th look, n_j paired requests of the budget's N
    pass when Z_j > b_j, fail when Z_j < −b_j, else draw another round (inconclusive at the budget)

b_j spends alpha · ln(1 + (e − 1) · n_j / N) of each one-sided alpha by look j, given the looks before
it (`boundaries`: the recursive numerical integration of Armitage, McPherson & Rowe), so however many
looks a cell takes and wherever they fall, a candidate exactly at the tolerance passes (or fails) with
probability <= alpha. Each side's boundary is computed as if the other did not stop the cell (a
non-binding, slightly conservative pair). The interval reported at a look is the repeated confidence
interval D̂_j ± b_j·SE_j, on the t scale (b_j's normal tail read off t with n_j − 1 degrees of freedom,
as the fixed test's), which holds at every look at once. The looks are recorded (the rows'
sequential_looks), so the gate judges a cell with the boundary it stopped on. The design replaced a
normal-mixture confidence sequence, which spent its error over every possible look and reached the
fixed design's verdicts on 56 % of an 80-prompt budget where this one takes 44-45 % (docs/gate.md).
"""

from __future__ import annotations

import functools
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
# A look plugs in the sample SD, which a handful of requests can put near 0 (two drafts that both
# accept every token of a thinking segment): no look before this many pairs.
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
    sequential: bool = False  # the interval is a sequential look's (repeated confidence interval)

    def line(self) -> str:
        need = f"; about {self.prompts_needed} prompts would see the tolerance" if self.prompts_needed else ""
        return (
            f"{self.metric}: {self.candidate:.3f} vs baseline draft {self.baseline:.3f}, "
            f"{self.diff:+.1%} [{self.low:+.1%}, {self.high:+.1%}] over {self.n} paired requests; "
            f"tolerance −{self.tolerance:.1%}, detectable drop {self.mdd:.1%}: {self.verdict}{need}"
        )


def _normal_quantile(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.isf(alpha))


def interval(d: float, u: np.ndarray, z: float) -> tuple[float, float]:
    """D̂'s two-sided interval at normal quantile z (each end's tail norm.sf(z)): the studentised statistic
    T = (D̂ − D) / SE, its quantile read on the t scale (n − 1 degrees of freedom), with the skewness of
    the per-request values removed by Hall's cubic transformation (Hall 1992, "On the removal of skewness by
    transformation", JRSS B 54): g(T) = T + a·T² + a²·T³/3 + b, a = γ / (3√n), b = γ / (6√n), γ the
    sample skewness of u; g(T) is ~N(0, 1) to O(1/n) and monotone, so D lies in [D̂ − SE·g⁻¹(q), D̂ − SE·g⁻¹(−q)].
    Acceptance counts are skewed (most steps accept few tokens, some accept all): a symmetric t interval
    then errs on one side, more the further out its quantile, as at a sequential look's boundary
    (tests/results/gate/test_paired.py measures both)."""
    from scipy.stats import norm, t

    n = len(u)
    sd = float(np.std(u, ddof=1))
    if not math.isfinite(z):
        return -math.inf, math.inf
    if sd == 0:
        return d, d
    q = float(t.isf(norm.sf(z), n - 1))
    m = u - u.mean()
    gamma = float(np.mean(m**3) / np.mean(m**2) ** 1.5)
    a, b = gamma / (3 * math.sqrt(n)), gamma / (6 * math.sqrt(n))

    def g_inverse(x: float) -> float:  # g(T) = ((1 + a·T)³ − 1) / (3a) + b, inverted
        return x - b if abs(a) < 1e-12 else (float(np.cbrt(3 * a * (x - b) + 1)) - 1) / a

    se = sd / math.sqrt(n)
    return d - se * g_inverse(q), d - se * g_inverse(-q)


def _quantiles(n: int, alpha: float, power: float) -> tuple[float, float]:
    from scipy.stats import norm, t

    return float(t.ppf(1 - alpha, n - 1)), float(norm.ppf(power))


def paired_estimate(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]],
    metric: int,
    tolerance: float,
    alpha: float = ALPHA,
    power: float = POWER,
    looks: Looks | None = None,
) -> PairedEstimate | None:
    """The fixed-design paired t test of one metric (None: fewer than MIN_PAIRS pairs or no drafts);
    with `looks`, the requests were drawn in rounds that stopped on the last of them
    (harness/bench/sequential.py): the interval is then that look's repeated confidence interval, which
    holds after the stop."""
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
    z = _normal_quantile(alpha) if looks is None else looks.boundary(alpha)
    low, high = interval(d, u, z)
    verdict: MetricVerdict = verdict_of(low, high, tolerance)
    if metric >= 0 and not material(tb, baseline_al(pairs), tolerance):
        verdict, need = "immaterial", None
    return PairedEstimate(name, tc, tb, d, se, low, high, n, tolerance, mdd, verdict, need, looks is not None)


def cell_estimates(
    pairs: Sequence[tuple[RequestCounts, RequestCounts]], k: int, tolerance: float, looks: Looks | None = None
) -> list[PairedEstimate]:
    """AL, then each per-position rate up to k, that the pairs can estimate (paired_estimate)."""
    return [e for m in range(-1, k) if (e := paired_estimate(pairs, m, tolerance, looks=looks)) is not None]


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


def spent(fraction: float, alpha: float) -> float:
    """The one-sided error spent by information fraction `fraction` (Lan–DeMets, Pocock type)."""
    return alpha * math.log(1 + (math.e - 1) * min(max(fraction, 0.0), 1.0))


def _trapezoid(grid: np.ndarray) -> np.ndarray:
    w = np.full(len(grid), grid[1] - grid[0])
    w[[0, -1]] /= 2
    return w


GRID_POINTS = 801  # per look: the boundaries' error is ~1e-4 of alpha (tests/results/gate/test_paired.py)


def _crossing(u: float, mass: np.ndarray, grid: np.ndarray, sd: float) -> float:
    """P(the score ends above u), from sub-density `mass` on `grid` plus a N(0, sd²) step."""
    from scipy.stats import norm

    return float(np.sum(mass * norm.sf((u - grid) / sd)))


@functools.lru_cache(maxsize=1024)
def boundaries(fractions: tuple[float, ...], alpha: float = ALPHA) -> tuple[float, ...]:
    """One-sided z boundaries b_1..b_K at looks with these increasing information fractions, each
    spending `spent`'s increment given the looks before it: the sub-density of the score S_j = Z_j·√t_j
    (Brownian motion under a candidate exactly at the tolerance) over the region that has not stopped
    is carried from look to look on a grid, and b_j solves P(cross at look j) = spent(t_j) − spent(t_{j−1})."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    out: list[float] = []
    t_prev = used = 0.0
    grid = np.zeros(1)
    mass = np.ones(1)  # before the first look: the score sits at 0
    for t in fractions:
        share, sd, width = spent(t, alpha) - used, math.sqrt(t - t_prev), 8 * math.sqrt(t)
        u = math.inf
        if share > 1e-15 and _crossing(1.5 * width, mass, grid, sd) < share:
            u = float(
                brentq(
                    lambda x, m=mass, g=grid, s=sd, a=share: _crossing(x, m, g, s) - a,
                    -1.5 * width,
                    1.5 * width,
                    xtol=1e-10,
                )
            )
        new = np.linspace(-width, min(u, width), GRID_POINTS)
        mass = (mass[None, :] * norm.pdf((new[:, None] - grid[None, :]) / sd) / sd).sum(axis=1) * _trapezoid(new)
        grid = new
        out.append(u / math.sqrt(t))
        t_prev, used = t, spent(t, alpha)
    return tuple(out)


@dataclass(frozen=True)
class Looks:
    """A cell drawn in rounds: the paired requests its budget makes (N) and the pairs at each look so
    far, the current one last."""

    planned: int
    at: tuple[int, ...]

    def boundary(self, alpha: float = ALPHA) -> float:
        """The current look's z boundary (module docstring)."""
        return boundaries(tuple(min(n / max(self.planned, 1), 1.0) for n in self.at), alpha)[-1]

    def then(self, n: int) -> Looks:
        return Looks(self.planned, (*self.at, n))


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
    looks: Looks,
    alpha: float = ALPHA,
    metric: int = -1,
) -> SequentialResult | None:
    """The current look (the last of `looks`) at all `pairs` so far; None while there is nothing to look
    at (fewer than two pairs, or no drafts)."""
    arr = metric_arrays(pairs, metric)
    t = len(arr)
    if t < 2 or arr[:, 1].sum() == 0 or arr[:, 3].sum() == 0:
        return None
    _, _, d, u = relative_difference(arr, 1.0 if metric < 0 else 0.0)
    if not math.isfinite(d):
        return None
    low, high = interval(d, u, looks.boundary(alpha))
    return SequentialResult(verdict_of(low, high, tolerance), t, len(looks.at), d, low, high)


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
    """Looks after each round of `round_size` pairs (in the given order) and stops at the first settled
    verdict, or at `max_prompts` (default: all pairs) inconclusive."""
    budget = min(len(pairs), max_prompts or len(pairs))
    looks, res = Looks(budget, ()), SequentialResult("inconclusive", 0, 0, math.nan, -math.inf, math.inf)
    for t in range(first_look(budget, round_size), budget + round_size, round_size):
        t = min(t, budget)
        seen = look(pairs[:t], tolerance, looks.then(t), alpha, metric)
        if seen is None:
            continue
        looks, res = looks.then(t), seen
        if res.verdict != "inconclusive" or t >= budget:
            break
    return res
