"""Tiny synthetic checkpoints for loader tests: real safetensors files, random small tensors,
no pretraining (milliseconds to write). The pretrained stand-ins are in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

HIDDEN, VOCAB, LAYERS = 16, 64, 4


def text_keys(prefix: str, layers: int = LAYERS) -> dict[str, tuple[int, ...]]:
    keys: dict[str, tuple[int, ...]] = {
        f"{prefix}model.embed_tokens.weight": (VOCAB, HIDDEN),
        f"{prefix}model.norm.weight": (HIDDEN,),
        f"{prefix}lm_head.weight": (VOCAB, HIDDEN),
    }
    for i in range(layers):
        p = f"{prefix}model.layers.{i}."
        keys.update(
            {
                p + "input_layernorm.weight": (HIDDEN,),
                p + "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
                p + "mlp.down_proj.weight": (HIDDEN, HIDDEN),
                p + "post_attention_layernorm.weight": (HIDDEN,),
            }
        )
    return keys


def write_checkpoint(
    folder: Path,
    config: dict,
    shapes: dict[str, tuple[int, ...]],
    num_shards: int = 2,
    seed: int = 0,
    overrides: dict[str, torch.Tensor] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    tensors = {k: torch.randn(*s, generator=g).to(torch.bfloat16) for k, s in shapes.items()}
    tensors.update(overrides or {})
    keys = sorted(tensors)
    (folder / "config.json").write_text(json.dumps(config))
    if num_shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    per = -(-len(keys) // num_shards)
    wm = {}
    for s in range(num_shards):
        name = f"model-{s + 1:05d}-of-{num_shards:05d}.safetensors"
        part = {k: tensors[k] for k in keys[s * per : (s + 1) * per]}
        save_file(part, str(folder / name))
        wm.update(dict.fromkeys(part, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return folder


def kimi_config(layers: int = LAYERS) -> dict:
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "kimi_k2",
            "hidden_size": HIDDEN,
            "num_hidden_layers": layers,
            "vocab_size": VOCAB,
            "num_attention_heads": 2,
            "kv_lora_rank": 8,
            "n_routed_experts": 4,
            "tie_word_embeddings": False,
        },
        "vision_config": {"hidden_size": 8},
    }


def kimi_like(folder: Path, extra: dict[str, tuple[int, ...]] | None = None, **kw) -> Path:
    shapes = text_keys("language_model.")
    shapes.update({"vision_tower.encoder.final_layernorm.weight": (8,), "mm_projector.proj.0.weight": (8, 8)})
    shapes.update(extra or {})
    return write_checkpoint(folder, kimi_config(), shapes, **kw)


def llama_like(folder: Path, **kw) -> Path:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "vocab_size": VOCAB,
        "num_attention_heads": 2,
        "tie_word_embeddings": False,
    }
    return write_checkpoint(folder, cfg, text_keys(""), num_shards=1, **kw)


def source_hash(path: str) -> str:
    """sha256 (16 hex) of the source of 'module:Qualified.name' — pins library internals."""
    import hashlib
    import importlib
    import inspect

    mod, attr = path.split(":")
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


def assert_source_unchanged(path: str, pinned: str, consumer: str) -> None:
    """Fail loudly, saying what to re-check, when a pinned library internal changes."""
    got = source_hash(path)
    assert got == pinned, (
        f"upstream changed {path} (source hash {got}, pinned {pinned}): {consumer} relies "
        "on it; review the change, then update the pinned hash"
    )


class ServedStub:
    """What engine_plan reads of a verifier (harness.engine.settings.ServedModel), no checkpoint:
    a plain (non-DeepSeek) decoder of the given text model type."""

    path = "/models/x"
    multimodal = False
    deepseek_family = False
    attention = "gqa"
    rope_type = None

    def __init__(self, text_model_type: str = "llama"):
        self.text_model_type = text_model_type
