"""A cell's derived columns from per-request records (no engine): the breakdowns sum to the pooled
counters, the speedup CI brackets the point value, and the AL gap gets the documented explanation."""

from __future__ import annotations

import pytest

from harness.bench.rows import ArmResult, RepeatRecord, RequestRecord, cell_rows
from harness.engine.counters import SpecCounters
from tests.results_fixtures import identity

IDENT = identity(repeats=2)
LOOP = tuple([5, 6, 7, 8] * 20)  # an output that copies itself


def _arms(prompt_tokens=(20, 30, 40, 50), outputs=None, steps_ok=True):
    base, spec = ArmResult(), ArmResult()
    steps = [(3, 1, 2, 0, 3), (2, 2, 2), (0, 0, 1, 3), (3, 3)]
    for rep in range(2):
        ids = []
        for i, (p, acc) in enumerate(zip(prompt_tokens, steps)):
            rid = f"p{i}#0"
            out = (outputs or {}).get(i, tuple(range(i, i + 12)))
            base.outputs.setdefault(rid, list(out))
            spec.outputs.setdefault(rid, list(out))
            spec.requests.append(
                RequestRecord(
                    rid, rep, p, out, 1.0 + i, acc if steps_ok else (), (3,) * len(acc) if steps_ok else (), 3, steps_ok
                )
            )
            spec.per_request.append((sum(acc), len(acc)))
            ids.append(rid)
            spec.counters = spec.counters + SpecCounters(
                len(acc), 3 * len(acc), sum(acc), tuple(sum(a > j for a in acc) for j in range(3))
            )
        for arm, wall in ((base, 4.0 + rep), (spec, 2.0 + rep)):
            arm.repeats.append(RepeatRecord(48, wall, tuple(ids), (12,) * 4, (1.0, 2.0, 3.0, 4.0)))
            arm.wall_s += wall
            arm.num_output_tokens += 48
            arm.num_requests += 4
    return base, spec


def test_breakdowns_sum_to_the_pooled_counters_and_speedup_has_a_ci():
    base, spec = _arms()
    _, rs = cell_rows(IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    by = rs.breakdowns
    assert sum(by.output_position.drafts) == rs.num_drafts == sum(by.prompt_length.drafts)
    assert by.output_position.labels == ["0-63", "64-255", "256+"]
    assert by.prompt_length.als[0] == pytest.approx(rs.acceptance_length)  # every prompt < 512 tokens
    assert not by.segment  # no </think> token given: no split
    assert rs.speedup_ci_low <= rs.speedup <= rs.speedup_ci_high
    assert rs.num_prompts == 4 and rs.al_se > 0


def test_summary_only_server_leaves_breakdowns_empty():
    base, spec = _arms(steps_ok=False)
    _, rs = cell_rows(IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    assert not rs.breakdowns.output_position and rs.al_se is None


def test_thinking_split_when_outputs_close_a_think_span():
    think = 99
    outputs = {i: tuple([1] * 6 + [think] + [2] * 5) for i in range(4)}
    base, spec = _arms(outputs=outputs)
    _, rs = cell_rows(
        IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1, end_think_id=think
    )
    assert rs.breakdowns.segment.labels == ["thinking", "answer"]
    assert sum(rs.breakdowns.segment.drafts) == rs.num_drafts


def test_gap_explanations_follow_the_precedence():
    base, spec = _arms(prompt_tokens=(900, 1000, 1100, 50))
    _, rs = cell_rows(
        IDENT, base, spec, predicted_al=4.0, deterministic_verifier=False, mismatch_tolerance=0.1, train_context_len=512
    )
    assert any(f.startswith("BEYOND TRAINING CONTEXT") for f in rs.flags)
    assert any("explained by BEYOND TRAINING CONTEXT" in f for f in rs.flags)
    assert not any(f.startswith("TRAIN/SERVE MISMATCH") for f in rs.flags)
    base, spec = _arms(outputs={i: LOOP for i in range(4)})
    _, rs = cell_rows(IDENT, base, spec, predicted_al=1.2, deterministic_verifier=False, mismatch_tolerance=0.1)
    assert rs.repetition_share > 0.3 and any("explained by LOOPING OUTPUTS" in f for f in rs.flags)
    base, spec = _arms()
    _, rs = cell_rows(
        IDENT, base, spec, predicted_al=4.0, deterministic_verifier=False, mismatch_tolerance=0.1, train_context_len=512
    )
    assert [f for f in rs.flags if f.startswith("TRAIN/SERVE MISMATCH")]


def test_itl_per_chunk_and_per_token_are_both_reported_and_per_token_averages_to_tpot():
    """A verify step streams up to k+1 tokens in one chunk: the per-chunk gaps (itl_ms_*, vLLM's
    convention) overstate the wait per token; per token, each gap is spread over its chunk."""
    from harness import metrics
    from harness.bench.arm import collect_output
    from harness.bench.rows import arm_row
    from harness.engine.base import GenOutput

    # ttft 0.1 s, then chunks of 3, 1 and 4 tokens after 0.3, 0.1 and 0.4 s: 9 tokens in 0.9 s
    o = GenOutput("p0#0", 5, list(range(9)), "length", 0.1, [0.3, 0.1, 0.4], [3, 1, 4], 0.9)
    assert metrics.per_token_itl(o.itl_s, o.itl_tokens) == pytest.approx([0.1] * 8)
    assert metrics.per_token_itl([0.3], [3, 1]) == []  # sizes unknown: nothing rather than a guess
    arm = ArmResult()
    collect_output(arm, o)
    row = arm_row(IDENT, "speculative", arm)
    assert row.itl_ms_median == pytest.approx(300) and row.itl_per_token_ms_median == pytest.approx(100)
    assert row.itl_per_token_ms_median == pytest.approx(row.tpot_ms_median)


def test_tokens_per_step_counts_the_steps_a_method_did_not_draft_on():
    from harness import metrics

    # ngram-like: 2 generations of 13 tokens, each the prefill's token + 2 drafted steps that accept
    # all 3 (4 tokens each) + 4 steps without a match (1 token each): vLLM's AL reads 4.0 over the
    # 4 drafted steps, the verifier ran 12 decode steps for 24 tokens
    sparse = SpecCounters(4, 12, 12, (4, 4, 4))
    assert metrics.acceptance_length(sparse) == 4.0
    assert metrics.verify_steps(26, 2, sparse) == 12 and metrics.tokens_per_step(26, 2, sparse) == 2.0
    # a draft on every step (EAGLE-3): the same 24 tokens in 8 drafted steps, tok/step = AL
    dense = SpecCounters(8, 24, 16, (8, 6, 2))
    assert metrics.tokens_per_step(26, 2, dense) == metrics.acceptance_length(dense) == 3.0
    assert metrics.tokens_per_step(2, 2, dense) is None  # nothing decoded past the prefill


def test_cell_rows_carry_tokens_per_step_for_the_speculative_arm_only():
    base, spec = _arms()
    rb, rs = cell_rows(IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    assert rb.tokens_per_step is None and rb.num_verify_steps is None
    # 8 generations, 96 tokens: 88 decoded over max(drafts, 88 − accepted) steps
    assert rs.num_verify_steps == max(rs.num_drafts, 88 - rs.num_accepted_tokens)
    assert rs.tokens_per_step == pytest.approx(88 / rs.num_verify_steps)
