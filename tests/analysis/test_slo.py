"""Open-loop load math (harness/analysis/slo.py): goodput, realised arrival and departure rates,
the saturation point, and each arm's SLO rate with its bootstrap CI and their ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis import slo
from harness.analysis.load import ABOVE, BELOW, CROSSES


def _arm(n: int, tpot_s: float, rate: float, spread: float = 0.1, seed: int = 0, fail: int = 0) -> list[slo.Timing]:
    """n requests of 33 tokens sent 1/rate apart, TPOT around tpot_s (lognormal, `spread`)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        tpot = tpot_s * float(rng.lognormal(0.0, spread))
        out.append(slo.Timing(0.05, 0.05 + 32 * tpot, 33, sent_s=i / rate))
    return out + [slo.Timing(None, None, 0)] * fail


def test_a_request_meets_the_slo_only_when_every_stated_bound_holds_and_failures_never_do():
    bounds = slo.bounds_s({"ttft_ms": 100, "tpot_ms": 20, "e2e_ms": None})
    assert bounds == {"ttft": 0.1, "tpot": 0.02}
    ok = slo.Timing(0.05, 0.05 + 32 * 0.015, 33)
    slow_first = slo.Timing(0.2, 0.2 + 32 * 0.015, 33)
    slow_tokens = slo.Timing(0.05, 0.05 + 32 * 0.03, 33)
    assert slo.meets(ok, bounds) and not slo.meets(slow_first, bounds) and not slo.meets(slow_tokens, bounds)
    assert not slo.meets(slo.Timing(None, None, 0), bounds)
    assert slo.Timing(0.1, 0.1, 1).tpot_s == 0.0  # vLLM: a one-token output has TPOT 0
    assert slo.goodput([ok, slow_first, slow_tokens, ok], bounds, wall_s=2.0) == pytest.approx(1.0)


def test_saturation_is_a_busy_span_longer_than_arrivals_allow_not_the_tail_of_a_short_run():
    """8 requests sent 0.5 s apart taking 1 s each (keeping up): busy 4.5 s for a 3.5 s send span
    plus the 1 s unloaded latency, stretch 1.0 (finished / wall, 8 / 4.5 = 1.8/s, reads below the
    2/s offered). The same 8 sent at once to a server that finishes one per second: stretch 8 / 1."""
    keep_up = [slo.Timing(0.1, 1.0, 10, sent_s=i * 0.5, batch="0#0") for i in range(8)]
    assert slo.arrival_rate(keep_up) == pytest.approx(2.0)
    assert slo.achieved_rate(keep_up) == pytest.approx(8 / 4.5)
    assert slo.stretch(keep_up, 1.0) == pytest.approx(1.0)
    backlog = [slo.Timing(0.1, 1.0 + i, 10, sent_s=0.0, batch="0#0") for i in range(8)]
    assert slo.stretch(backlog, 1.0) == pytest.approx(8.0)
    assert slo.saturation([2.0, 100.0], [keep_up, backlog]) == 100.0
    assert slo.saturation([2.0, 4.0], [keep_up, keep_up]) is None
    # a burst all finishing together (one batched decode) is caught too: a departure rate would not
    burst = [slo.Timing(0.1, 3.0, 10, sent_s=0.01 * i, batch="0#0") for i in range(8)]
    assert slo.saturation([2.0, 100.0], [keep_up, burst]) == 100.0


def test_slo_rate_interpolates_where_the_worst_p99_crosses_its_bound():
    rates = [1.0, 2.0, 4.0, 8.0]
    cross = slo.slo_rate(rates, [0.5, 0.8, 1.2, 3.0])  # crosses between 2 and 4, in log2(rate)
    assert cross.where == CROSSES and 2.0 < cross.concurrency < 4.0
    assert cross.concurrency == pytest.approx(2 ** (1 + (0.8 - 1) / (0.8 - 1.2)))
    assert slo.slo_rate(rates, [0.1, 0.2, 0.3, 0.4]).where == ABOVE
    assert slo.slo_rate(rates, [1.5, math.inf, math.inf, math.inf]).where == BELOW
    assert slo.position(slo.slo_rate(rates, [0.1] * 4), 8.0) == 8.0


def test_a_draft_that_halves_tpot_serves_about_twice_the_rate_within_the_slo_and_the_ci_holds_it():
    """A planted pair: the baseline's TPOT grows with load past its SLO at ~4/s; the speculative
    arm's is half of it at every rate, so it crosses at ~8/s. The ratio's CI covers 2 and excludes 1."""
    rates = [1.0, 2.0, 4.0, 8.0, 16.0]
    bounds = {"tpot": 0.05}

    def tpot(rate: float, speedup: float) -> float:
        return 0.02 * (1 + rate / 4) ** 1.3 / speedup

    base = [_arm(60, tpot(r, 1.0), r, seed=i) for i, r in enumerate(rates)]
    spec = [_arm(60, tpot(r, 2.0), r, seed=10 + i) for i, r in enumerate(rates)]
    cmp = slo.compare_slo_rates(rates, base, spec, bounds, num_resamples=500)
    b, s = cmp.baseline.point, cmp.speculative.point
    assert b.where == CROSSES and s.where == CROSSES
    assert 2.0 < b.concurrency < 6.0 and 6.0 < s.concurrency < 16.0, (b, s)
    assert cmp.ratio is not None and cmp.ratio_low is not None and cmp.ratio_high is not None
    assert 1.0 < cmp.ratio_low <= cmp.ratio <= cmp.ratio_high
    assert cmp.baseline.low <= b.concurrency <= cmp.baseline.high
    # the same arm against itself: ratio 1 inside its CI
    same = slo.compare_slo_rates(rates, base, base, bounds, num_resamples=500)
    assert same.ratio == pytest.approx(1.0) and same.ratio_low <= 1.0 <= same.ratio_high


def test_failed_requests_count_as_missing_the_slo_and_a_baseline_that_never_meets_it_has_no_ratio():
    rates = [1.0, 2.0]
    ok = [_arm(20, 0.01, r) for r in rates]
    failing = [_arm(20, 0.01, r, fail=5) for r in rates]  # 20 % failed: p99 is a failure
    assert slo.score(failing[0], {"tpot": 0.05}) >= slo.FAILED_SCORE / 10
    cmp = slo.compare_slo_rates(rates, failing, ok, {"tpot": 0.05}, num_resamples=200)
    assert cmp.baseline.point.where == BELOW and cmp.ratio is None


def test_each_offered_rate_is_a_cell_of_its_own_and_the_offline_engine_is_refused_arrivals():
    from harness.bench.grid import plan_grid
    from harness.errors import BadInput
    from harness.recipe import load_recipe
    from tests.conftest import PLAIN_RECIPE

    b = load_recipe(
        PLAIN_RECIPE,
        [
            "bench.engine='server'",
            "bench.request_rate=[2.0, 8.0]",
            "bench.suites=['chat']",
            "bench.k=[3]",
            "bench.concurrency=[1]",
        ],
    ).bench
    cells = plan_grid(b, ["d"], ["chat"], {"chat": ["chat"]})
    assert [c.request_rate for c in cells] == [2.0, 8.0]
    assert [c.id for c in cells] == ["d__chat__k3__c1__t0__r2", "d__chat__k3__c1__t0__r8"]
    closed = load_recipe(PLAIN_RECIPE, ["bench.suites=['chat']", "bench.k=[3]", "bench.concurrency=[1]"]).bench
    assert [c.id for c in plan_grid(closed, ["d"], ["chat"], {"chat": ["chat"]})] == ["d__chat__k3__c1__t0"]
    with pytest.raises(BadInput, match="request_rate needs arrival times"):
        load_recipe(PLAIN_RECIPE, ["bench.engine='offline'", "bench.request_rate=[2.0]"])
    with pytest.raises(BadInput, match="states no bound"):
        load_recipe(PLAIN_RECIPE, ["bench.slo={}"])


def test_the_harness_schedules_the_arrivals_vllms_client_draws(monkeypatch):
    """scheduled_arrivals against vLLM's own get_request on a fake clock: the same offsets for a
    seed (so latencies can count from arrival), and both arms share them (one seed per batch)."""
    import asyncio

    import numpy as np
    from vllm.benchmarks import serve
    from vllm.benchmarks.datasets import SampleRequest

    from harness.engine.base import Arrivals
    from harness.engine.server import scheduled_arrivals

    clock = [0.0]

    async def sleep(dt):
        clock[0] += dt

    monkeypatch.setattr(serve.time, "time", lambda: clock[0])
    monkeypatch.setattr(serve.asyncio, "sleep", sleep)

    async def vllm_offsets(arr: Arrivals) -> list[float]:
        reqs = [SampleRequest(prompt="x", prompt_len=1, expected_output_len=1) for _ in range(7)]
        np.random.seed(arr.seed)
        return [clock[0] async for _ in serve.get_request(reqs, arr.rate, arr.burstiness)]

    for arr in (Arrivals(4.0, 1.0, 0), Arrivals(2.5, 0.5, 3)):
        clock[0] = 0.0
        assert asyncio.run(vllm_offsets(arr)) == pytest.approx(scheduled_arrivals(7, arr))


def test_open_loop_settings_at_their_defaults_keep_a_recipes_fingerprint():
    """Run folders are named by the recipe's fingerprint (the main job reuses a finished training
    through it): the open-loop fields, unset or written at their defaults, leave it as it was
    before they existed; setting one makes another recipe."""
    from harness.recipe import load_recipe

    plain = load_recipe(None)
    explicit = load_recipe(
        None, ["bench.request_rate=[]", "bench.burstiness=1.0", "bench.arrival_seed=0", "bench.engine='offline'"]
    )
    # the value since [gate] left the fingerprint (it only judges: another tolerance regates the run)
    assert explicit.fingerprint() == plain.fingerprint() == "6379f8744573"
    regated = load_recipe(None, ["gate.tolerance=0.2", "gate.noise_aware=false", "gate.min_slo_rate_ratio=1.1"])
    assert regated.fingerprint() == plain.fingerprint()
    assert load_recipe(None, ["bench.engine='server'", "bench.request_rate=[2.0]"]).fingerprint() != plain.fingerprint()
