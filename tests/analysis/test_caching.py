"""Prefix caching on vs off (issue 27 item 3), the pure parts: the per-turn paired comparison and its
flag (harness/analysis/caching.py), vLLM's prefix-cache counters read from both metric surfaces,
and the per-turn hit rate a cell keeps. The real-engine pair runs in tests/e2e/test_open_loop_engine.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from harness.analysis.caching import CACHE_CHANGES, cache_flag, turn_diffs
from harness.engine.base import BatchResult
from harness.engine.counters import counters_from_offline, counters_from_prometheus


def _records(conversations: int, turns: int, accept_by_turn, seed: int) -> list[dict]:
    """Per conversation and turn a request with 12 verify steps at k = 3, accepting per step a
    draw around accept_by_turn[turn] (the same draws for the same seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(conversations):
        for t in range(turns):
            p = accept_by_turn[t]
            accepted = tuple(int(x) for x in rng.binomial(3, p, size=12))
            out.append({"request_id": f"conv-{c}#{t}", "repeat": 0, "accepted": accepted, "drafted": (3,) * 12})
    return out


def test_identical_cells_differ_by_exactly_zero_and_are_not_flagged():
    """T = 0 on a lossless engine: the cache gives the same tokens, so the same steps."""
    on = _records(16, 2, (0.7, 0.7), seed=1)
    diffs = turn_diffs(on, [dict(r) for r in on])
    assert [d.turn for d in diffs] == [0, 1]
    assert all(d.diff == 0 and d.ci == (0.0, 0.0) and not d.changed for d in diffs)
    assert cache_flag(diffs) is None


def test_a_planted_drop_on_the_second_turn_is_flagged_there_only():
    on = _records(24, 2, (0.7, 0.8), seed=1)
    off = _records(24, 2, (0.7, 0.5), seed=2)  # caching off accepts less on turn 2 (planted)
    d1, d2 = turn_diffs(on, off)
    assert d2.changed and d2.ci is not None and d2.ci[0] > 0 and d2.diff > 0.5
    assert not d1.changed and d1.ci is not None and d1.ci[0] < 0 < d1.ci[1]  # same rate, other draws
    flag = cache_flag([d1, d2])
    assert flag is not None and flag.startswith(CACHE_CHANGES) and "turn 2" in flag and "turn 1" not in flag


def test_pairs_only_conversations_both_cells_reached_and_skips_records_without_steps():
    on = _records(6, 2, (0.7, 0.7), seed=1)
    off = [r for r in _records(6, 2, (0.7, 0.7), seed=1) if r["request_id"] != "conv-5#1"]  # outgrew the context
    on.append({"request_id": "conv-9#0", "repeat": 0, "accepted": (), "drafted": ()})  # a baseline-like record
    d1, d2 = turn_diffs(on, off)
    assert (d1.conversations, d2.conversations) == (6, 5)


def test_prefix_cache_counters_from_both_metric_surfaces_and_their_batch_deltas():
    text = "\n".join(
        [
            "# TYPE vllm:prefix_cache_queries counter",
            'vllm:prefix_cache_queries_total{engine="0"} 300.0',
            "# TYPE vllm:prefix_cache_hits counter",
            'vllm:prefix_cache_hits_total{engine="0"} 120.0',
            "# TYPE vllm:generation_tokens counter",
            'vllm:generation_tokens_total{engine="0"} 50.0',
        ]
    )
    _, served = counters_from_prometheus(text)
    assert served == {"prefix_cache_queries": 300.0, "prefix_cache_hits": 120.0, "generation_tokens": 50.0}
    metrics = [
        SimpleNamespace(name="vllm:prefix_cache_queries", value=40),
        SimpleNamespace(name="vllm:prefix_cache_hits", value=8),
    ]
    _, offline = counters_from_offline(metrics)
    assert offline == {"prefix_cache_queries": 40.0, "prefix_cache_hits": 8.0}
    before = {"prefix_cache_queries": 100.0, "prefix_cache_hits": 20.0, "generation_tokens": 10.0}
    assert BatchResult.deltas(before, served) == {"generation_tokens": 40.0, "prefix_cache": (200.0, 100.0)}
    assert BatchResult.deltas({}, {}) == {"generation_tokens": None, "prefix_cache": None}  # an engine without them


def test_speedup_per_turn_is_each_turns_tok_s_ratio_and_empty_for_one_turn():
    from harness.bench.rows import ArmResult, turn_speedups

    base, spec = ArmResult(), ArmResult()
    base.tokens_wall_by_turn = [[100, 2.0], [100, 4.0]]  # 50 and 25 tok/s
    spec.tokens_wall_by_turn = [[100, 1.0], [90, 1.8]]  # 100 and 50 tok/s
    assert turn_speedups(base, spec) == [2.0, 2.0]
    spec.tokens_wall_by_turn = spec.tokens_wall_by_turn[:1]
    assert turn_speedups(base, spec) == []  # a single-turn suite: the cell's speedup says it
