"""Open-loop load (issue 27): latency SLOs, goodput, the saturation point, and the highest offered
request rate an arm serves within its SLO, per arm and the speculative arm's over its baseline's
("how much more traffic the same GPUs carry with this draft").

Per finished request (vLLM's benchmark conventions, vllm/benchmarks/serve.py calculate_metrics,
but timed from the request's scheduled arrival: harness/engine/server.py _from_arrival):
  TTFT = first token's arrival - request arrived; e2e = last token's arrival - request arrived;
  TPOT = (e2e - TTFT) / (output tokens - 1), 0 for a one-token output.
  A request meets the SLO when every stated bound holds (TTFT <= ttft_ms, TPOT <= tpot_ms,
  e2e <= e2e_ms); a failed request never does.
  goodput = requests meeting the SLO / the arm's wall time (req/s), as vLLM's request_goodput.

Rates, per batch of finished requests (one round of one repeat: one arrival schedule):
  arrival rate = (n - 1) / (last send - first send): the offered rate as realised (Poisson gaps
  are random; vLLM rescales them so a batch of N spans N / rate);
  achieved rate = n / busy span, busy span = last finish - first send (vLLM's request throughput,
  completed / duration); over several batches the counts and spans are summed.
Saturation, on a grid of offered rates: an arm that keeps up finishes a batch one unloaded
  latency after its last send, so its busy span is its send span + L0, L0 the median e2e latency
  at the lowest offered rate less any wait for a slot (the service time, so an arm backlogged
  already there reads as saturated there); stretch = sum of busy spans / sum of (send span + L0). The saturation
  point is the first offered rate whose stretch exceeds 1 / (1 - SATURATION_TOLERANCE): its
  requests took that much longer than arrivals allow (a backlog, or a burst slowing the batch).
  With few requests the plain ratio achieved / offered would read low at every rate (the busy span
  includes the last request's latency); a departure rate (finishes within the span of finishes)
  reads high for a burst whose requests all finish together. None: it kept up on the whole grid.

SLO rate: the highest offered rate at which the arm's p99 of every stated metric is within its
  bound. score(rate) = max over stated metrics of p99 / bound (<= 1 meets; a failed request counts
  as an infinite latency). On the grid, the first rate whose score exceeds 1 and the rate before it
  are joined by a straight line in log2(rate), and its crossing of 1 is the SLO rate (the crossover
  of harness/analysis/load.py, on -score). Every rate meets: "above the grid" (at least the top
  rate); the lowest rate fails already: "below the grid".
  CI: bootstrap (seeded numpy generator, 2000 resamples, 95 %, percentile): the requests of every
  rate are resampled with replacement, the same request indices in both arms (they ran the same
  prompts on the same arrival schedule: bench.arrival_seed), the scores and SLO rates recomputed;
  the ratio spec / baseline per replicate. A position off the grid counts as the grid's top rate
  (above: a lower bound on the rate) or 0 (below); a ratio over 0 is infinite.
  With n requests per rate, p99 is the (n-1) x 0.99-th order statistic, linearly interpolated: with
  fewer than 100 requests it sits between the two slowest.
Pure functions; the report and the gate read them through harness/results/slo_view.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.load import Cross, crossing, grid_position
from harness.schema_requests import RequestRecord

SATURATION_TOLERANCE = 0.10
SLO_PERCENTILE = 99.0
METRICS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class Timing:
    """One request of an arm, as the SLO sees it. ttft_s/e2e_s None: the request failed."""

    ttft_s: float | None
    e2e_s: float | None
    output_tokens: int
    sent_s: float | None = None  # from its batch's first send (open loop: its scheduled arrival)
    queue_s: float = 0.0  # open loop: waited for a slot under the concurrency cap (inside ttft_s/e2e_s)
    batch: str = ""  # the arrival schedule it belongs to (repeat and turn)

    @property
    def ok(self) -> bool:
        return self.ttft_s is not None and self.e2e_s is not None

    @property
    def tpot_s(self) -> float | None:
        if not self.ok:
            return None
        assert self.ttft_s is not None and self.e2e_s is not None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0

    def value(self, metric: str) -> float:
        """The metric in seconds; infinite for a failed request (it meets no bound)."""
        v = {"ttft": self.ttft_s, "tpot": self.tpot_s, "e2e": self.e2e_s}[metric]
        return math.inf if v is None else v


def timings_from_records(records: Sequence[RequestRecord], num_failed: int) -> list[Timing]:
    """An arm's requests as the SLO sees them, from its per-request records (the arm's own, or read
    back from the cell's side file): the finished ones by (repeat, request id), so both arms line up
    prompt by prompt, then a never-meeting entry per failure."""
    done = sorted(records, key=lambda r: (r.repeat, r.request_id))
    timings = [
        Timing(
            r.ttft_s,
            r.latency_s,
            len(r.output_token_ids),
            r.sent_s,
            r.queue_s or 0.0,
            f"{r.repeat}#{str(r.request_id).rpartition('#')[2]}",
        )
        for r in done
    ]
    return timings + [Timing(None, None, 0)] * num_failed


def bounds_s(slo: Mapping[str, float | None]) -> dict[str, float]:
    """The stated bounds in seconds, from {ttft_ms, tpot_ms, e2e_ms} (unset ones left out)."""
    return {m: float(v) / 1000.0 for m in METRICS if (v := slo.get(f"{m}_ms")) is not None}


def meets(t: Timing, bounds: Mapping[str, float]) -> bool:
    return t.ok and all(t.value(m) <= b for m, b in bounds.items())


def goodput(timings: Sequence[Timing], bounds: Mapping[str, float], wall_s: float) -> float | None:
    if wall_s <= 0:
        return None
    return sum(meets(t, bounds) for t in timings) / wall_s


def _batches(timings: Sequence[Timing]) -> list[tuple[int, float, float]]:
    """(finished requests, send span, busy span) per batch, for finished requests with a send time."""
    sends: dict[str, list[tuple[float, float]]] = {}
    for t in timings:
        if t.ok and t.sent_s is not None:
            assert t.e2e_s is not None
            sends.setdefault(t.batch, []).append((t.sent_s, t.sent_s + t.e2e_s))
    return [
        (len(v), max(s for s, _ in v) - min(s for s, _ in v), max(f for _, f in v) - min(s for s, _ in v))
        for v in sends.values()
    ]


def arrival_rate(timings: Sequence[Timing]) -> float | None:
    """The offered rate as realised: (n - 1) / send span, summed over batches (module docstring)."""
    b = _batches(timings)
    gaps, span = sum(n - 1 for n, _, _ in b), sum(s for _, s, _ in b)
    return gaps / span if gaps and span > 0 else None


def achieved_rate(timings: Sequence[Timing]) -> float | None:
    """Finished requests / busy span, summed over batches (module docstring)."""
    b = _batches(timings)
    n, busy = sum(n for n, _, _ in b), sum(x for _, _, x in b)
    return n / busy if n and busy > 0 else None


def stretch(timings: Sequence[Timing], unloaded_s: float) -> float | None:
    """Busy spans over what keeping up allows (send spans + one unloaded latency per batch)."""
    b = _batches(timings)
    allowed = sum(s + unloaded_s for _, s, _ in b)
    return sum(x for _, _, x in b) / allowed if b and allowed > 0 else None


def saturation(
    offered: Sequence[float], per_rate: Sequence[Sequence[Timing]], tolerance: float = SATURATION_TOLERANCE
) -> float | None:
    """The first offered rate (ascending) whose stretch exceeds 1 / (1 - tolerance), against the
    median e2e latency at the lowest offered rate (module docstring)."""
    pts = sorted(zip(offered, per_rate, strict=True), key=lambda p: p[0])
    lowest = [t.e2e_s - t.queue_s for t in pts[0][1] if t.ok and t.e2e_s is not None] if pts else []
    if not lowest:
        return None
    unloaded = float(np.median(lowest))
    for o, timings in pts:
        x = stretch(timings, unloaded)
        if x is not None and x > 1 / (1 - tolerance):
            return o
    return None


FAILED_SCORE = 1e30  # a failed request's value / bound: finite, so percentiles interpolate to it, not to NaN


def _matrix(timings: Sequence[Timing], bounds: Mapping[str, float]) -> np.ndarray:
    """(requests, metrics) of value / bound."""
    m = np.asarray([[t.value(m) / b for m, b in bounds.items()] for t in timings], dtype=float)
    return np.minimum(m, FAILED_SCORE).reshape(len(timings), len(bounds))


def score(timings: Sequence[Timing], bounds: Mapping[str, float], q: float = SLO_PERCENTILE) -> float:
    """max over the stated metrics of their q-th percentile / bound (<= 1: the SLO holds at q)."""
    if not timings or not bounds:
        return math.inf
    return float(np.percentile(_matrix(timings, bounds), q, axis=0).max())


def slo_rate(rates: Sequence[float], scores: Sequence[float]) -> Cross:
    """Where the score first rises above 1, interpolated in log2(rate) (module docstring)."""
    finite = [min(s, 1e300) for s in scores]  # crossing interpolates: keep a failed rate's inf finite
    return crossing(rates, [-s for s in finite], threshold=-1.0)


def position(c: Cross, top_rate: float) -> float:
    """A crossing as a rate: the grid's top when above it, 0 when below it."""
    return grid_position(c, top_rate)


@dataclass(frozen=True)
class SloRate:
    point: Cross
    low: float | None
    high: float | None
    scores: tuple[float, ...] = ()  # per rate of the grid: worst p99 / bound (<= 1 meets)


@dataclass(frozen=True)
class SloComparison:
    baseline: SloRate
    speculative: SloRate
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None


def _replicate_scores(
    per_rate: Sequence[Sequence[Timing]], bounds: Mapping[str, float], idx: Sequence[np.ndarray], q: float
) -> np.ndarray:
    """(resamples, rates) of scores, the requests of rate j resampled by idx[j] (resamples, n_j)."""
    cols = []
    for timings, ix in zip(per_rate, idx, strict=True):
        m = _matrix(timings, bounds)  # (n, metrics)
        if not len(timings):
            cols.append(np.full(ix.shape[0], np.inf))
            continue
        cols.append(np.percentile(m[ix], q, axis=1).max(axis=1))
    return np.stack(cols, axis=1)


def compare_slo_rates(
    rates: Sequence[float],
    baseline: Sequence[Sequence[Timing]],
    speculative: Sequence[Sequence[Timing]],
    bounds: Mapping[str, float],
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
    q: float = SLO_PERCENTILE,
) -> SloComparison:
    """Both arms' SLO rates with their CIs, and the ratio speculative / baseline with its CI.
    baseline[j] and speculative[j]: the arms' requests at rates[j], in the same (prompt) order;
    where their counts differ the shorter one's indices are used for both."""
    top = max(rates)
    rng = np.random.default_rng(seed)
    idx = [
        rng.integers(0, max(1, min(len(b), len(s))), (num_resamples, max(1, min(len(b), len(s)))))
        for b, s in zip(baseline, speculative, strict=True)
    ]
    alpha = (1 - level) / 2 * 100

    def arm(per_rate: Sequence[Sequence[Timing]]) -> tuple[SloRate, np.ndarray]:
        scores = tuple(score(t, bounds, q) for t in per_rate)
        reps = _replicate_scores(per_rate, bounds, idx, q)
        pos = np.asarray([position(slo_rate(rates, row.tolist()), top) for row in reps])
        low, high = float(np.percentile(pos, alpha)), float(np.percentile(pos, 100 - alpha))
        return SloRate(slo_rate(rates, scores), low, high, scores), pos

    b, bpos = arm(baseline)
    s, spos = arm(speculative)
    bp, sp = position(b.point, top), position(s.point, top)
    if bp <= 0:  # the baseline misses the SLO at every rate: no ratio
        return SloComparison(b, s, None, None, None)
    ratios = np.divide(spos, bpos, out=np.full_like(spos, np.inf), where=bpos > 0)
    low = float(np.percentile(ratios, alpha, method="lower"))
    high = float(np.percentile(ratios, 100 - alpha, method="higher"))
    return SloComparison(b, s, sp / bp, low, high if math.isfinite(high) else None)
