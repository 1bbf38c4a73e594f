"""When speculation pays under load (issue 14): speedup with a CI, the crossover concurrency, the
best k per load as a vLLM schedule, and whether a dynamic-k arm holds up against every fixed k.

Speedup and its CI (paired A/B repeats; same prompts, max tokens, sampling, concurrency):
  speedup = (Σ spec output tokens / Σ spec wall) / (Σ baseline output tokens / Σ baseline wall),
  sums over repeats — the ratio of the two arms' output tok/s as bench/rows.py computes them.
  Bootstrap (percentile, seeded numpy generator, default 2000 resamples, 95 %): resample repeats
  with replacement, keeping each repeat's two arms together (they ran interleaved, so they share
  the machine's drift) — scipy.stats.bootstrap(paired=True) over the repeats; where per-request
  timings are given, also resample the requests of each chosen repeat, the same prompt indices in
  both arms (paired) — a two-stage resampling, done by hand. A request's share of its batch's
  wall is wall × its latency / Σ latencies of the batch, so the full sample reproduces the
  point value exactly. No CI from a single repeat without per-request timings.
  Arms not interleaved (bench.engine_schedule one_at_a_time: the baseline's repeats before and after
  the speculative engine's, maybe one more of them): no repeat of one arm pairs with a repeat of
  the other, so each arm's repeats are resampled on their own; where every repeat of both arms
  timed the same requests, one draw of request indices per resample serves all of them (the
  prompts stay paired). No CI without per-request timings unless each arm has two repeats.

Crossover: speedup on a concurrency grid, x = log2(concurrency). The crossover is where the
  speedup first falls below 1.0: the first grid point below 1.0 and the point before it are joined
  by a straight line in x, and its crossing of 1.0 is the crossover (back in concurrency, 2**x).
  None of the points below 1.0 -> "above the grid"; the first point already below -> "below the
  grid". A later recovery above 1.0 is ignored (the first loss is what a server meets).
  CI, from CI bounds: the crossing of the lower bounds is the CI's low end, of the upper bounds its
  high end (pointwise bounds: approximate, no simultaneous band). From bootstrap replicates (one
  column per concurrency): the crossover of every replicate, below-grid as −inf and above-grid as
  +inf, and the order statistics at (1 ± level)/2; an infinite end reads as below/above the grid.

Best k per load: at each measured concurrency the k with the highest output tok/s, k = 0 (no
  speculation) allowed, ties to the smaller k. As vLLM 0.32's
  `speculative_config.num_speculative_tokens_per_batch_size`: a list of inclusive batch-size
  ranges [(start, end, k), ...], sorted, non-overlapping, the first starting at 1, k >= 0
  (vllm/v1/spec_decode/dynamic/utils.py); vLLM carries the last k forward past the last range and
  caps every k at `num_speculative_tokens`, which must be > 0 (so it is the schedule's largest k).
  vLLM keys on the running batch size; each batch size takes the k of the nearest measured
  concurrency in log2 (ties to the lower), and neighbouring ranges with the same k merge.

Dynamic vs fixed k, per concurrency: a fixed k beats the dynamic arm beyond noise when its CI's
  low end is above the dynamic arm's CI high end (the two CIs do not overlap); the dynamic arm
  "matches or beats every fixed k within noise" at a concurrency where no fixed k does. A missing
  CI end falls back to the point value (no noise allowance claimed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from harness.errors import BadInput

ABOVE, BELOW, CROSSES = "above the grid", "below the grid", "crosses"


# ----------------------------------------------------------------------------- speedup CI


@dataclass(frozen=True)
class ArmRepeat:
    """One arm's measured batch in one repeat. Per-request lists are optional, in prompt order."""

    output_tokens: int
    wall_s: float
    request_tokens: tuple[int, ...] = ()
    request_latency_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class Estimate:
    """A point value with its CI ends (None when not estimable)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def bounds(self) -> tuple[float | None, float | None]:
        """(low, high), the point value standing in for a missing end."""
        return (self.value if self.low is None else self.low, self.value if self.high is None else self.high)


def speedup_point(baseline: Sequence[ArmRepeat], speculative: Sequence[ArmRepeat]) -> float | None:
    def tok_s(arm: Sequence[ArmRepeat]) -> float:
        wall = sum(r.wall_s for r in arm)
        return sum(r.output_tokens for r in arm) / wall if wall > 0 else 0.0

    base, spec = tok_s(baseline), tok_s(speculative)
    return spec / base if base and spec else None


def _request_arrays(arm: ArmRepeat) -> tuple[np.ndarray, np.ndarray] | None:
    """(tokens, wall share) per request, or None without usable per-request timings."""
    lat = np.asarray(arm.request_latency_s, dtype=float)
    if not len(lat) or len(lat) != len(arm.request_tokens) or lat.sum() <= 0:
        return None
    return np.asarray(arm.request_tokens, dtype=float), arm.wall_s * lat / lat.sum()


def _speedup_of_sums(bt: np.ndarray, bw: np.ndarray, st: np.ndarray, sw: np.ndarray, axis: int = -1) -> np.ndarray:
    """(Σ spec tokens / Σ spec wall) / (Σ base tokens / Σ base wall) along `axis`."""
    return (st.sum(axis=axis) / sw.sum(axis=axis)) / (bt.sum(axis=axis) / bw.sum(axis=axis))


def speedup_replicates(
    baseline: Sequence[ArmRepeat],
    speculative: Sequence[ArmRepeat],
    num_resamples: int = 2000,
    seed: int = 0,
    interleaved: bool = True,
) -> np.ndarray:
    """Bootstrap replicates of the speedup (empty when there is nothing to resample); `interleaved`:
    the arms' repeats ran A/B in turn and pair by index (module docstring)."""
    rng = np.random.default_rng(seed)
    if not interleaved and baseline and speculative:
        return _unpaired_replicates(baseline, speculative, num_resamples, rng)
    if len(baseline) != len(speculative) or not baseline:
        raise BadInput(f"speedup CI needs paired repeats: {len(baseline)} baseline vs {len(speculative)} speculative")
    n_rep = len(baseline)
    per_req = [(_request_arrays(b), _request_arrays(s)) for b, s in zip(baseline, speculative)]
    paired = all(b is not None and s is not None and len(b[0]) == len(s[0]) for b, s in per_req)
    if not paired:
        if n_rep < 2 or num_resamples < 1:
            return np.empty(0)
        from scipy.stats import bootstrap  # imported here: scipy.stats takes about a second

        cols = [
            np.asarray([getattr(r, f) for r in arm], dtype=float)
            for arm in (baseline, speculative)
            for f in ("output_tokens", "wall_s")
        ]
        # paired: one index draw per resample picks whole repeats, both arms together
        res = bootstrap(
            cols,
            _speedup_of_sums,
            paired=True,
            vectorized=True,
            n_resamples=num_resamples,
            method="percentile",
            rng=rng,
        )
        return res.bootstrap_distribution
    # Two-stage (repeats, then the requests of each chosen repeat): scipy.stats.bootstrap resamples
    # one level of observations only, so this nested resampling stays a loop.
    out = np.empty(num_resamples)
    for i in range(num_resamples):
        sums = np.zeros(4)  # base tokens, base wall, spec tokens, spec wall
        for r in rng.integers(0, n_rep, size=n_rep):
            (bt, bw), (st, sw) = per_req[r]
            pick = rng.integers(0, len(bt), size=len(bt))
            sums += (bt[pick].sum(), bw[pick].sum(), st[pick].sum(), sw[pick].sum())
        out[i] = (sums[2] / sums[3]) / (sums[0] / sums[1])
    return out


def _unpaired_replicates(
    baseline: Sequence[ArmRepeat], speculative: Sequence[ArmRepeat], num_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Each arm's repeats resampled on their own; requests by one shared draw when all timed the same ones."""
    arms = (baseline, speculative)
    per_req = [[_request_arrays(r) for r in arm] for arm in arms]
    sizes = {len(a[0]) if a is not None else -1 for arm in per_req for a in arm}
    by_request = len(sizes) == 1 and min(sizes) > 0
    if num_resamples < 1 or not (by_request or min(len(baseline), len(speculative)) >= 2):
        return np.empty(0)
    (n_req,) = sizes
    out = np.empty(num_resamples)
    for i in range(num_resamples):
        pick = rng.integers(0, n_req, size=n_req) if by_request else None
        tok_s = []
        for arm, reqs in zip(arms, per_req, strict=True):
            tokens = wall = 0.0
            for r in rng.integers(0, len(arm), size=len(arm)):
                got = reqs[r]
                if pick is not None and got is not None:
                    tokens, wall = tokens + got[0][pick].sum(), wall + got[1][pick].sum()
                else:
                    tokens, wall = tokens + arm[r].output_tokens, wall + arm[r].wall_s
            tok_s.append(tokens / wall)
        out[i] = tok_s[1] / tok_s[0]
    return out


def speedup_ci(
    baseline: Sequence[ArmRepeat],
    speculative: Sequence[ArmRepeat],
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
    interleaved: bool = True,
) -> Estimate:
    """Speedup with its percentile bootstrap CI (module docstring)."""
    reps = speedup_replicates(baseline, speculative, num_resamples, seed, interleaved)
    point = speedup_point(baseline, speculative)
    if not len(reps) or point is None:
        return Estimate(point)
    alpha = (1 - level) / 2 * 100
    return Estimate(point, float(np.percentile(reps, alpha)), float(np.percentile(reps, 100 - alpha)))


# ----------------------------------------------------------------------------- crossover


@dataclass(frozen=True)
class Cross:
    concurrency: float | None  # None unless where == CROSSES
    where: str

    def __str__(self) -> str:
        return f"{self.concurrency:.3g}" if self.where == CROSSES else self.where


@dataclass(frozen=True)
class Crossover:
    point: Cross
    low: Cross
    high: Cross
    method: str  # "CI bounds" | "bootstrap" | "none"


def crossing(concurrencies: Sequence[float], speedups: Sequence[float], threshold: float = 1.0) -> Cross:
    """Where speedup first falls below threshold, interpolated linearly in log2(concurrency)."""
    pts = sorted(zip(concurrencies, speedups, strict=True))
    if not pts or any(c <= 0 for c, _ in pts):
        raise BadInput(f"crossover needs positive concurrencies, got {list(concurrencies)}")
    first = next((i for i, (_, s) in enumerate(pts) if s < threshold), None)
    if first is None:
        return Cross(None, ABOVE)
    if first == 0:
        return Cross(None, BELOW)
    (c0, s0), (c1, s1) = pts[first - 1], pts[first]
    x0, x1 = math.log2(c0), math.log2(c1)
    x = x0 + (s0 - threshold) / (s0 - s1) * (x1 - x0)
    return Cross(2.0**x, CROSSES)


def grid_position(cross: Cross, top: float) -> float:
    """A crossing as a point on its axis: where it crosses; the grid's top when it stays above the
    threshold on the whole grid; 0 when it is below it already at the grid's bottom."""
    if cross.where == CROSSES:
        return float(cast(float, cross.concurrency))  # a crossing has its value
    return float(top) if cross.where == ABOVE else 0.0


def crossover_from_bounds(concurrencies: Sequence[float], speedups: Sequence[Estimate]) -> Crossover:
    # callers pass estimates that have a value; past the check below both CI ends are set too
    point = crossing(concurrencies, cast("list[float]", [e.value for e in speedups]))
    if any(e.low is None or e.high is None for e in speedups):
        return Crossover(point, Cross(None, "no CI"), Cross(None, "no CI"), "none")
    return Crossover(
        point,
        crossing(concurrencies, cast("list[float]", [e.low for e in speedups])),
        crossing(concurrencies, cast("list[float]", [e.high for e in speedups])),
        "CI bounds",
    )


def crossover_from_replicates(
    concurrencies: Sequence[float], speedups: Sequence[float], replicates: np.ndarray, level: float = 0.95
) -> Crossover:
    """replicates: shape (resamples, len(concurrencies)), column j the replicates at concurrency j
    (speedup_replicates of that cell; give each concurrency its own seed: the cells are independent)."""
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim != 2 or reps.shape[1] != len(concurrencies):
        raise BadInput(f"replicates must be (resamples, {len(concurrencies)}), got shape {reps.shape}")
    code = {BELOW: -math.inf, ABOVE: math.inf}
    xs = np.asarray(
        [c.concurrency if c.where == CROSSES else code[c.where] for c in (crossing(concurrencies, row) for row in reps)]
    )
    alpha = (1 - level) / 2 * 100
    ends = [float(np.percentile(xs, alpha, method="lower")), float(np.percentile(xs, 100 - alpha, method="higher"))]
    low, high = (Cross(None, BELOW if v < 0 else ABOVE) if math.isinf(v) else Cross(v, CROSSES) for v in ends)
    return Crossover(crossing(concurrencies, speedups), low, high, "bootstrap")


# ----------------------------------------------------------------------------- best k per load


def best_k(tok_s: Mapping[tuple[int, int], float]) -> dict[int, int]:
    """{concurrency: k} from {(k, concurrency): output tok/s}; k = 0 is no speculation; ties -> smaller k."""
    if any(k < 0 for k, _ in tok_s):
        raise BadInput("k must be >= 0 (0 = no speculation)")
    out: dict[int, tuple[float, int]] = {}
    for (k, c), v in sorted(tok_s.items()):
        if v is not None and (c not in out or v > out[c][0]):
            out[c] = (v, k)
    return {c: k for c, (_, k) in sorted(out.items())}


def batch_size_schedule(best: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """vLLM's num_speculative_tokens_per_batch_size: [(start, end, k), ...] inclusive ranges."""
    cs = sorted(best)
    if not cs or cs[0] < 1:
        raise BadInput(f"a schedule needs concurrencies >= 1, got {cs}")
    ranges: list[tuple[int, int, int]] = []
    start = 1
    for i, c in enumerate(cs):
        end = math.isqrt(c * cs[i + 1]) if i + 1 < len(cs) else c  # nearest in log2, ties to the lower
        if ranges and ranges[-1][2] == best[c]:
            ranges[-1] = (ranges[-1][0], end, best[c])
        else:
            ranges.append((start, end, best[c]))
        start = end + 1
    return ranges


def speculative_config_schedule(best: Mapping[int, int]) -> dict[str, object] | None:
    """The speculative-config keys a dynamic arm needs; None when no k > 0 wins anywhere
    (speculation never pays on the grid, and vLLM needs num_speculative_tokens > 0)."""
    schedule = batch_size_schedule(best)
    top = max(k for _, _, k in schedule)
    if top == 0:
        return None
    return {"num_speculative_tokens": top, "num_speculative_tokens_per_batch_size": [list(r) for r in schedule]}


def recipe_snippet(best: Mapping[int, int], source: str, table: str = "bench", key: str = "dynamic_k") -> str:
    """A TOML snippet carrying the schedule, with the measurement it came from."""
    schedule = batch_size_schedule(best)
    measured = ", ".join(f"c={c}: k={k}" for c, k in sorted(best.items()))
    ranges = ", ".join(f"[{a}, {b}, {k}]" for a, b, k in schedule)
    return (
        f"# best k per load from {source}: highest output tok/s at each concurrency (k = 0: no speculation)\n"
        f"# measured: {measured}\n"
        f"# vLLM speculative_config.num_speculative_tokens_per_batch_size: [batch from, batch to, k], inclusive;\n"
        f"# each batch size takes the k of the nearest measured concurrency (log2); the last k carries on\n"
        f"[{table}]\n{key} = [{ranges}]\n"
    )


# ----------------------------------------------------------------------------- dynamic vs fixed


@dataclass(frozen=True)
class DynamicVerdict:
    concurrency: int
    holds: bool  # matches or beats every fixed k within noise
    beaten_by: tuple[int, ...]  # fixed ks whose CI lies wholly above the dynamic arm's


def dynamic_vs_fixed(
    dynamic: Mapping[int, Estimate], fixed: Mapping[tuple[int, int], Estimate]
) -> list[DynamicVerdict]:
    """Per concurrency of the dynamic arm: which fixed k (keys (k, concurrency)) beat it beyond noise.
    A concurrency where the dynamic arm has no value does not hold (nothing was shown there)."""
    out = []
    for c in sorted(dynamic):
        _, dyn_high = dynamic[c].bounds()
        if dyn_high is None:
            out.append(DynamicVerdict(c, False, ()))
            continue
        beaten = tuple(
            sorted(
                k
                for (k, cc), est in fixed.items()
                if cc == c and est.value is not None and cast(float, est.bounds()[0]) > dyn_high
            )
        )
        out.append(DynamicVerdict(c, not beaten, beaten))
    return out
