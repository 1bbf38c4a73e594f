"""Speedup CI, crossover, best k per load and dynamic-vs-fixed (harness/analysis/load.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis import load
from harness.analysis.load import ArmRepeat, Estimate
from harness.errors import BadInput


def test_speedup_point_is_the_ratio_of_summed_tokens_over_summed_wall():
    base = [ArmRepeat(1000, 10.0), ArmRepeat(1000, 12.0)]
    spec = [ArmRepeat(1000, 5.0), ArmRepeat(1000, 6.0)]
    assert load.speedup_point(base, spec) == pytest.approx((2000 / 11) / (2000 / 22))


def test_speedup_ci_over_repeats_brackets_the_point_and_is_deterministic():
    base = [ArmRepeat(960, w) for w in (10.0, 10.4, 9.8, 10.9, 10.1)]
    spec = [ArmRepeat(960, w) for w in (5.6, 5.2, 5.9, 5.5, 5.0)]
    est = load.speedup_ci(base, spec, seed=3)
    assert est.low < est.value < est.high
    assert 1.7 < est.low and est.high < 2.1
    assert load.speedup_ci(base, spec, seed=3) == est


def test_single_repeat_needs_per_request_timings_for_a_ci():
    assert load.speedup_ci([ArmRepeat(100, 2.0)], [ArmRepeat(100, 1.0)]) == Estimate(2.0)
    lat_b, lat_s = (1.0, 2.0, 1.5, 0.5), (0.5, 1.2, 0.6, 0.3)
    base = [ArmRepeat(100, 5.0, (25, 25, 25, 25), lat_b)]
    spec = [ArmRepeat(100, 2.6, (25, 25, 25, 25), lat_s)]
    est = load.speedup_ci(base, spec)
    assert est.value == pytest.approx(5.0 / 2.6)
    assert est.low < est.value < est.high
    # a request's wall share is wall x latency / sum: the full sample gives the point value exactly
    bt, bw = load._request_arrays(base[0])
    assert bw.sum() == pytest.approx(5.0) and bt.sum() == 100


def test_unpaired_repeats_are_refused():
    with pytest.raises(BadInput, match="paired"):
        load.speedup_ci([ArmRepeat(1, 1.0)], [])


def test_arms_not_interleaved_resample_their_repeats_apart_and_pair_their_prompts():
    """Engines one at a time (harness/bench/one_at_a_time.py): the baseline's repeats before and
    after the speculative engine's, R = 1 giving 2 baseline repeats and 1 speculative."""
    base = [ArmRepeat(100, 5.0), ArmRepeat(100, 5.2)]
    spec = [ArmRepeat(100, 2.5)]
    with pytest.raises(BadInput, match="paired"):
        load.speedup_ci(base, spec)  # pairing by index needs as many repeats
    # one speculative repeat, no per-request timings: no CI
    assert load.speedup_ci(base, spec, interleaved=False) == Estimate((100 / 2.5) / (200 / 10.2))
    two = load.speedup_ci(base, [*spec, ArmRepeat(100, 2.6)], interleaved=False)
    assert two.low < two.value < two.high
    # per-request timings of the same requests: one draw of prompt indices serves every repeat of
    # both arms, so a draft exactly twice as fast on every prompt reads 2.0 in every replicate
    tokens, lat = (10, 40, 20, 30), (1.0, 4.0, 2.0, 3.0)
    base = [ArmRepeat(100, 10.0, tokens, lat), ArmRepeat(100, 10.0, tokens, lat)]
    spec = [ArmRepeat(100, 5.0, tokens, tuple(x / 2 for x in lat))]
    reps = load.speedup_replicates(base, spec, 200, seed=1, interleaved=False)
    assert len(reps) == 200 and np.allclose(reps, 2.0)
    slow_last = [ArmRepeat(100, 5.5, tokens, (0.5, 2.0, 1.0, 2.0))]  # no longer proportional: the CI opens
    est = load.speedup_ci(base, slow_last, interleaved=False)
    assert est.low < est.value < est.high and est.value == pytest.approx(10 / 5.5)


GRID = [1, 2, 4, 8, 16]


def test_crossover_interpolates_in_log2_concurrency():
    cross = load.crossing(GRID, [1.8, 1.5, 1.2, 0.9, 0.6])
    # between c=4 (1.2) and c=8 (0.9): x = 2 + 0.2/0.3 -> 2**(8/3)
    assert cross.where == load.CROSSES and cross.concurrency == pytest.approx(2 ** (2 + 2 / 3))
    assert load.crossing(GRID, [1.8, 1.5, 1.2, 1.1, 1.05]) == load.Cross(None, "above the grid")
    assert load.crossing(GRID, [0.9, 0.8, 0.7, 0.6, 0.5]) == load.Cross(None, "below the grid")
    assert load.crossing(list(reversed(GRID)), [0.6, 0.9, 1.2, 1.5, 1.8]) == cross  # order-free


def test_crossover_ci_from_bounds():
    ests = [
        Estimate(1.8, 1.7, 1.9),
        Estimate(1.5, 1.4, 1.6),
        Estimate(1.2, 1.1, 1.3),
        Estimate(0.9, 0.8, 1.0),
        Estimate(0.6, 0.5, 0.7),
    ]
    co = load.crossover_from_bounds(GRID, ests)
    assert co.method == "CI bounds"
    assert co.low.concurrency == pytest.approx(2 ** (2 + 1 / 3))  # lower bounds 1.1 -> 0.8
    assert co.high.concurrency == pytest.approx(8.0)  # upper bounds 1.0 at c=8 is not below 1.0; 0.7 at 16
    assert co.low.concurrency < co.point.concurrency < co.high.concurrency
    wide = load.crossover_from_bounds(GRID, [Estimate(1.1, 0.95, 1.3)] * 5)
    assert (wide.point.where, wide.low.where, wide.high.where) == ("above the grid", "below the grid", "above the grid")


def test_crossover_ci_from_replicates():
    rng = np.random.default_rng(0)
    point = np.array([1.8, 1.5, 1.2, 0.9, 0.6])
    reps = point + rng.normal(0, 0.05, size=(500, 5))
    co = load.crossover_from_replicates(GRID, point, reps)
    assert co.low.where == co.high.where == load.CROSSES
    assert co.low.concurrency < co.point.concurrency < co.high.concurrency
    flat = load.crossover_from_replicates(GRID, [1.0] * 5, 1.0 + rng.normal(0, 0.3, size=(500, 5)))
    assert (flat.low.where, flat.high.where) == ("below the grid", "above the grid")


TOK_S = {  # (k, concurrency) -> output tok/s; k = 0 is the no-speculation baseline
    (0, 1): 40,
    (1, 1): 60,
    (2, 1): 70,
    (3, 1): 75,
    (0, 2): 78,
    (1, 2): 110,
    (2, 2): 125,
    (3, 2): 126,
    (0, 4): 150,
    (1, 4): 190,
    (2, 4): 200,
    (3, 4): 195,
    (0, 8): 290,
    (1, 8): 300,
    (2, 8): 280,
    (3, 8): 260,
    (0, 16): 540,
    (1, 16): 500,
    (2, 16): 450,
    (3, 16): 420,
}


def test_best_k_per_concurrency_allows_no_speculation():
    assert load.best_k(TOK_S) == {1: 3, 2: 3, 4: 2, 8: 1, 16: 0}
    assert load.best_k({(1, 1): 50.0, (2, 1): 50.0}) == {1: 1}  # tie -> the smaller k


def test_schedule_is_what_vllm_accepts_and_maps_batch_sizes_to_the_nearest_measured_load():
    from vllm.v1.spec_decode.dynamic.utils import (
        build_dynamic_sd_schedule_lookup,
        validate_and_normalize_dynamic_sd_schedule,
    )

    best = load.best_k(TOK_S)
    schedule = load.batch_size_schedule(best)
    assert schedule == [(1, 2, 3), (3, 5, 2), (6, 11, 1), (12, 16, 0)]
    cfg = load.speculative_config_schedule(best)
    assert cfg == {
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 2, 3], [3, 5, 2], [6, 11, 1], [12, 16, 0]],
    }
    assert validate_and_normalize_dynamic_sd_schedule(cfg["num_speculative_tokens_per_batch_size"]) == schedule
    dense = build_dynamic_sd_schedule_lookup(cfg["num_speculative_tokens_per_batch_size"], 32, 3)
    for c, k in best.items():
        assert dense[c] == k  # every measured concurrency runs its best k
    assert dense[32] == 0  # vLLM carries the last k on


def test_no_schedule_when_speculation_never_pays():
    assert load.speculative_config_schedule({1: 0, 4: 0}) is None


def test_recipe_snippet_is_valid_toml_with_the_schedule():
    import tomllib

    text = load.recipe_snippet(load.best_k(TOK_S), source="run demo-1")
    assert tomllib.loads(text) == {"bench": {"dynamic_k": [[1, 2, 3], [3, 5, 2], [6, 11, 1], [12, 16, 0]]}}
    assert "c=16: k=0" in text


def test_dynamic_arm_holds_unless_a_fixed_k_is_above_it_beyond_noise():
    dyn = {1: Estimate(74, 70, 78), 4: Estimate(180, 176, 184)}
    fixed = {
        (3, 1): Estimate(75, 71, 79),
        (1, 1): Estimate(60, 58, 62),
        (2, 4): Estimate(200, 190, 210),
        (3, 4): Estimate(185, 180, 190),
    }
    v1, v4 = load.dynamic_vs_fixed(dyn, fixed)
    assert (v1.concurrency, v1.holds, v1.beaten_by) == (1, True, ())  # k=3 higher but within noise
    assert (v4.holds, v4.beaten_by) == (False, (2,))  # k=2's CI lies above; k=3's overlaps
    no_ci = load.dynamic_vs_fixed({1: Estimate(74)}, {(3, 1): Estimate(75)})
    assert no_ci[0].beaten_by == (3,)  # without CIs no noise allowance is claimed


def test_bad_grid_is_refused():
    with pytest.raises(BadInput):
        load.crossing([0, 1], [1.2, 0.8])
    assert math.isfinite(load.crossing([1, 2], [1.2, 0.8]).concurrency)


def test_a_dynamic_arm_without_a_value_does_not_hold():
    (v,) = load.dynamic_vs_fixed({2: Estimate(None)}, {(1, 2): Estimate(100.0)})
    assert (v.holds, v.beaten_by) == (False, ())
