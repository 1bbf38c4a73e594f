"""Per-step acceptance breakdowns (harness/analysis/steps.py): literal numbers, no engine."""

from __future__ import annotations

import pytest

from harness.analysis import steps
from harness.engine.counters import SpecCounters
from harness.errors import BadInput
from harness.metrics import acceptance_length, bootstrap_ci, per_position_rates

# Two requests at k=3, shaped like vLLM's RequestSpecDecodeMetrics.to_dict() at the detailed level.
VLLM_A = {
    "mean_acceptance_length": 2.75,
    "draft_acceptance_rate": 7 / 12,
    "acceptance_histogram": [1, 1, 0, 2],
    "num_spec_steps": 4,
    "num_accepted_draft_tokens": 7,
    "num_draft_tokens": 12,
    "num_spec_tokens": 3,
    "per_step_accepted": [3, 1, 3, 0],
    "per_step_drafted": [3, 3, 3, 3],
}
VLLM_B = {
    "num_spec_steps": 3,
    "num_accepted_draft_tokens": 2,
    "num_draft_tokens": 9,
    "num_spec_tokens": 3,
    "acceptance_histogram": [1, 2, 0, 0],
    "per_step_accepted": [1, 0, 1],
    "per_step_drafted": [3, 3, 3],
}


def _requests():
    a = steps.from_vllm(VLLM_A, prompt_tokens=100, answer_start=6)
    b = steps.from_vllm(VLLM_B, prompt_tokens=900, answer_start=0)
    return [a, b]


def test_positions_count_the_prefill_token_and_each_steps_bonus():
    a, b = _requests()
    # A: step 0 starts at 1 (token 0 is the prefill's), emits 3+1 -> next at 5, then 1+1 -> 7, 3+1 -> 11
    assert a.positions().tolist() == [1, 5, 7, 11]
    assert b.positions().tolist() == [1, 3, 4]


def test_per_step_sums_equal_the_pooled_counters_exactly():
    reqs = _requests()
    pooled = steps.pooled_counters(reqs)
    assert pooled == SpecCounters(7, 21, 9, (5, 2, 2))
    assert acceptance_length(pooled) == pytest.approx(1 + 9 / 7)
    # every split partitions the steps: its groups add back to the pooled counters exactly
    for split in (
        steps.by_segment(reqs),
        steps.by_output_position(reqs, edges=(4, 8)),
        steps.by_prompt_length(reqs, edges=(512,)),
    ):
        total = SpecCounters(accepted_per_pos=(0, 0, 0))
        for s in split:
            total = total + s.counters
        assert total == pooled


def test_segment_split_assigns_a_straddling_step_to_thinking():
    reqs = _requests()
    thinking, answer = steps.by_segment(reqs)
    # A's answer starts at 6: step at 5 emits 5,6 (straddles) -> thinking with step at 1; steps at 7, 11 answer.
    # B has thinking off (answer_start 0): all its steps are answer.
    assert (thinking.label, thinking.counters) == ("thinking", SpecCounters(2, 6, 4, (2, 1, 1)))
    assert answer.counters == SpecCounters(5, 15, 5, (3, 1, 1))
    assert thinking.acceptance_length == pytest.approx(3.0)
    assert answer.acceptance_length == pytest.approx(2.0)
    assert steps.straddling_steps(reqs) == 1
    assert thinking.num_requests == 1 and answer.num_requests == 2


def test_thinking_off_has_no_thinking_segment():
    b = steps.from_vllm(VLLM_B, answer_start=steps.answer_start([5, 6, 7], end_think_id=99, thinking=False))
    thinking, answer = steps.by_segment([b])
    assert thinking.counters.num_drafts == 0 and thinking.acceptance_length is None and thinking.ci is None
    assert answer.counters.num_drafts == 3


def test_answer_start_is_just_after_the_closing_tag_or_the_end():
    assert steps.answer_start([11, 12, 99, 13], end_think_id=99, thinking=True) == 3
    assert steps.answer_start([11, 12, 13], end_think_id=99, thinking=True) == 3  # never closed: all thinking


def test_output_position_buckets_and_labels():
    assert steps.bucket_labels((64, 256)) == ["0-63", "64-255", "256+"]
    early, late = steps.by_output_position(_requests(), edges=(5,))
    # steps at positions 1 (A), 1, 3, 4 (B) are early; A's 5, 7, 11 are late
    assert early.counters == SpecCounters(4, 12, 5, (3, 1, 1))
    assert late.counters == SpecCounters(3, 9, 4, (2, 1, 1))
    assert per_position_rates(late.counters) == pytest.approx((2 / 3, 1 / 3, 1 / 3))


def test_prompt_length_buckets_keep_requests_whole():
    short, long_ = steps.by_prompt_length(_requests(), edges=(512,))
    assert short.label == "0-511" and short.counters.num_drafts == 4
    assert long_.label == "512+" and long_.counters == SpecCounters(3, 9, 2, (2, 0, 0))


def test_split_ci_is_measure_bootstrap_over_each_requests_sums():
    reqs = [
        steps.RequestSteps((2, 1, 3), (3, 3, 3), answer_start=0),
        steps.RequestSteps((0, 1), (3, 3), answer_start=0),
        steps.RequestSteps((3, 3), (3, 3), answer_start=0),
    ]
    (_, answer) = steps.by_segment(reqs, seed=7)
    assert answer.ci == bootstrap_ci([6, 1, 6], [3, 2, 2], seed=7)
    assert answer.ci[0] < answer.acceptance_length < answer.ci[1]
    assert steps.by_segment(reqs, seed=7)[1].ci == answer.ci  # deterministic


def test_summary_level_metrics_are_refused_with_the_fix():
    summary = {k: v for k, v in VLLM_B.items() if not k.startswith("per_step")}
    with pytest.raises(BadInput, match="detailed"):
        steps.from_vllm(summary)
    with pytest.raises(BadInput, match="disagree"):
        steps.from_vllm({**VLLM_B, "num_accepted_draft_tokens": 5})
    with pytest.raises(BadInput, match="length"):
        steps.RequestSteps((1, 2), (3,))
    with pytest.raises(BadInput, match="answer_start"):
        steps.by_segment([steps.RequestSteps((1,), (3,))])


def test_reads_vllms_metrics_object_too():
    from vllm.v1.metrics.stats import RequestSpecDecodeMetrics

    m = RequestSpecDecodeMetrics.new(3)
    for d, a in ((3, 3), (3, 1), (3, 0)):
        m.observe(num_draft_tokens=d, num_accepted=a, detailed=True)
    from_obj, from_dict = steps.from_vllm(m), steps.from_vllm(m.to_dict())
    assert from_obj == from_dict == steps.RequestSteps((3, 1, 0), (3, 3, 3), num_spec_tokens=3)
    assert acceptance_length(steps.pooled_counters([from_obj])) == pytest.approx(m.to_dict()["mean_acceptance_length"])


def test_al_by_turn_pools_each_turns_steps_and_the_bench_reads_the_turn_from_the_request_id():
    from harness.bench.breakdown import turn_of

    first = steps.RequestSteps((1, 1, 0), (3, 3, 3), 10, turn=0)  # 2 accepted over 3 drafts
    second = steps.RequestSteps((3, 2), (3, 3), 200, turn=1)  # 5 accepted over 2 drafts
    split = steps.by_turn([first, second, steps.RequestSteps((0,), (3,), 12, turn=0)])
    assert [s.label for s in split] == ["turn 1", "turn 2"]
    assert split[0].acceptance_length == pytest.approx(1 + 2 / 4)
    assert split[1].acceptance_length == pytest.approx(1 + 5 / 2)
    assert [turn_of(x) for x in ("mt-bench-3#0", "mt-bench-3#1", "no-turn")] == [0, 1, 0]
