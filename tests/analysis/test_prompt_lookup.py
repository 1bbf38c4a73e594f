"""vLLM's ngram speculation replayed offline (harness/analysis/prompt_lookup.py): the proposal is
vLLM's own, token for token, and the replay counts steps, drafts and accepted tokens as vLLM does."""

from __future__ import annotations

import random

import numpy as np
import pytest

from harness.analysis.prompt_lookup import LOOKUP_MAX, LOOKUP_MIN, LookupCounts, expected, propose, replay


def test_the_proposal_is_vllms_on_random_contexts():
    """vLLM's numba proposer (longest recurring suffix of 2..4 tokens, its earliest occurrence) and the
    replay's agree on every context, small vocabularies making many matches of every length."""
    from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as vllm_propose

    rng = random.Random(0)
    for _ in range(500):
        ctx = [rng.randrange(rng.choice([2, 3, 5, 20])) for _ in range(rng.randint(1, 60))]
        k = rng.randint(1, 5)
        theirs = vllm_propose(np.array(ctx, dtype=np.int32), LOOKUP_MIN, LOOKUP_MAX, 10**6, k)
        assert propose(ctx, k) == list(theirs), (ctx, k)


def test_longest_suffix_wins_and_the_earliest_occurrence_is_taken():
    # suffix (1, 2, 3) recurs once at the start; the 2-gram (2, 3) recurs twice: the 3-gram wins
    assert propose([1, 2, 3, 7, 8, 2, 3, 9, 1, 2, 3], 2) == [7, 8]
    assert propose([5, 6, 9, 5, 6, 8, 5, 6], 3) == [9, 5, 6]  # earliest of two equal matches
    assert propose([1, 2, 3, 4], 3) == []  # no suffix recurs
    assert propose([1, 2, 1, 2], 5) == [1, 2]  # fewer than k: the context ends


def test_replay_counts_steps_drafts_and_accepted_tokens():
    # a loop "1 2 3" the prompt already shows: every step after the first token proposes and is accepted in full
    counts = replay([1, 2, 3, 1, 2, 3], [1, 2, 3, 1, 2, 3, 1], k=3)
    # token 0 from the prefill; steps accept 3 (2,3,1) +1, then 2 of the remaining 2 (+ nothing after)
    assert counts == LookupCounts(steps=2, drafts=2, draft_tokens=6, accepted=5)
    assert counts.acceptance_length == pytest.approx(1 + 5 / 2)
    assert counts.tokens_per_step == pytest.approx(1 + 5 / 2)
    # nothing recurs: one undrafted step per token; AL undefined, 1 token per step
    none = replay([10, 11], [12, 13, 14], k=3)
    assert none == LookupCounts(steps=2, drafts=0, draft_tokens=0, accepted=0)
    assert none.acceptance_length is None and none.tokens_per_step == 1.0


def test_expected_pools_over_outputs():
    pairs = [([1, 2, 3, 1, 2, 3], [1, 2, 3, 1, 2, 3, 1]), ([10, 11], [12, 13, 14])]
    pooled = expected(pairs, k=3)
    assert pooled == LookupCounts(steps=4, drafts=2, draft_tokens=6, accepted=5)
    assert pooled.tokens_per_step == pytest.approx(1 + 5 / 4)  # every step counted
    assert pooled.acceptance_length == pytest.approx(1 + 5 / 2)  # drafted steps only (vLLM's AL)
