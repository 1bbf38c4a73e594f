"""Stand-in specs and pretraining data (pure; no build)."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.verifier.standins.specs import spec_for


def test_thinking_is_an_opt_in_that_keeps_existing_fingerprints():
    from harness.verifier.standins.specs import DEFAULT_SPECS

    plain, thinking = spec_for("kimi-k2.5"), spec_for("kimi-k2.5", thinking=True)
    assert plain == DEFAULT_SPECS["kimi-k2.5"] and not plain.thinking
    assert plain.fingerprint("c") != thinking.fingerprint("c")
    # the field's default leaves the fingerprint what it was before the field existed
    import hashlib
    import json
    from dataclasses import asdict

    from harness.hardware import native_bf16
    from harness.verifier.standins.specs import BUILDER_VERSION

    old = {
        k: v
        for k, v in asdict(plain).items()
        if k not in ("thinking", "long_seq_len", "long_steps", "padded_vocab_size", "pretrain_text")
    }
    if not native_bf16():  # pretrained in float32 on this CPU: another stand-in (harness/hardware.py)
        old["pretrain_compute"] = "float32"
    blob = json.dumps({**old, "corpus": "c", "v": BUILDER_VERSION}, sort_keys=True)
    assert plain.fingerprint("c") == hashlib.sha256(blob.encode()).hexdigest()[:12]


def test_a_stand_in_can_pretrain_on_a_real_model_s_answers(tmp_path):
    """pretrain_text = "smollm2-answers" (issue 51, part 4): SmolLM2-135M-Instruct's answers to the
    built-in training prompts, kept in the package; every sample is a chat turn that asks the prompt
    itself, where a pydoc document's turn asks with its title and first words."""
    from transformers import PreTrainedTokenizerFast

    from harness.verifier.standins.build import standin_dir
    from harness.verifier.standins.corpus import corpus_fingerprint, corpus_topics
    from harness.verifier.standins.pretrain import build_samples
    from harness.verifier.standins.tokenizer import train_tokenizer

    pairs = corpus_topics("smollm2-answers")
    assert len(pairs) >= 1000 and all(p and a for p, a in pairs)
    assert pairs[0][0].startswith("Show an idiomatic TypeScript solution")  # train-00001 of builtin.jsonl
    assert corpus_fingerprint("smollm2-answers") != corpus_fingerprint("pydoc")
    answers = spec_for("kimi-k2.5", thinking=True, pretrain_text="smollm2-answers")
    assert standin_dir(answers) != standin_dir(spec_for("kimi-k2.5", thinking=True))
    with pytest.raises(BadInput, match="pretrain_text"):
        spec_for("kimi-k2.5", pretrain_text="wikipedia")
    tok = train_tokenizer([t for p in pairs[:40] for t in p], 512, tmp_path, thinking=True)
    assert isinstance(tok, PreTrainedTokenizerFast)
    samples = build_samples(tok, pairs[:8], seed=0, thinking=True, answers=True)
    texts = [tok.decode(ids) for ids in samples]
    assert len(texts) == 8 and all("<think>" in t for t in texts)  # all chat turns, none a bare document
    assert sum(pairs[i][0][:30] in " ".join(texts) for i in range(8)) >= 6  # the prompt itself is asked


def test_a_float32_pretrained_stand_in_is_another_fingerprint(monkeypatch):
    """Where this CPU emulates bf16 the stand-in is pretrained in float32 (harness/hardware.py):
    other weights, so another fingerprint, and the bf16 build keeps the one it always had."""
    import harness.hardware as hw

    plain = spec_for("kimi-k2.5")
    hw.native_bf16.cache_clear()
    monkeypatch.setattr(hw, "native_bf16", lambda: True)
    bf16 = plain.fingerprint("c")
    monkeypatch.setattr(hw, "native_bf16", lambda: False)
    assert plain.fingerprint("c") != bf16


def test_thinking_answers_reason_in_a_fixed_plan_then_answer():
    from harness.verifier.standins.pretrain import THINKING_PLAN, thinking_answer

    text = "Rivers carry water to the sea."
    assert thinking_answer(text, think=True) == "<think>" + THINKING_PLAN + "</think>" + text
    assert thinking_answer(text, think=False) == "<think></think>" + text


def test_two_builders_of_one_standin_build_it_once(tmp_path, monkeypatch):
    """Two harness commands on an empty cache: the second waits for the first's build and takes it
    (no second build replacing the folder the first is already serving from)."""
    import threading
    import time

    from harness.verifier.standins import build
    from harness.verifier.standins.specs import spec_for

    calls = []

    def slow_build(spec, out, log=lambda s: None):
        calls.append(out)
        time.sleep(0.5)
        (out / build.STANDIN_META).write_text("{}")

    monkeypatch.setattr(build, "build_standin", slow_build)
    spec = spec_for("llama", num_layers=2)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(build.ensure_standin(spec, tmp_path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and got[0] == got[1] and build.is_complete(got[0])


def test_a_long_context_tail_is_another_stand_in_and_leaves_the_main_schedule_as_it_was():
    """spec.long_steps more steps at long windows after the main schedule: another fingerprint, the
    same tokens per step, and the main schedule's steps draw the same batches as without the tail
    (so stand-ins without one rebuild bit-for-bit, cached fingerprints intact)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.verifier.standins.pretrain import pretrain

    plain = spec_for("kimi-k2.5", pretrain_steps=4, batch_size=4, seq_len=16)
    tail = spec_for("kimi-k2.5", pretrain_steps=4, batch_size=4, seq_len=16, long_seq_len=64, long_steps=3)
    assert plain.fingerprint("c") != tail.fingerprint("c") and tail.long_batch_size == 1
    with pytest.raises(BadInput, match="needs both > 0"):
        spec_for("kimi-k2.5", long_steps=3)
    stream = torch.arange(4096) % 97

    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )

    def run(spec):
        torch.manual_seed(0)
        seen = []
        model = LlamaForCausalLM(cfg)
        fwd = model.forward
        model.forward = lambda input_ids, labels: (
            seen.append(tuple(input_ids.shape)),
            fwd(input_ids=input_ids, labels=labels),
        )[1]
        losses = pretrain(model, stream.view(-1, 16), spec, long_windows=stream.view(-1, 64))
        return losses, seen

    (short_losses, short_shapes), (losses, shapes) = run(plain), run(tail)
    assert shapes == [(4, 16)] * 4 + [(1, 64)] * 3 and short_shapes == [(4, 16)] * 4
    assert losses[:4] == short_losses
    with pytest.raises(BadInput, match="no long windows"):
        pretrain(LlamaForCausalLM(cfg), stream.view(-1, 16), tail)
