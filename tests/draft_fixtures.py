"""Tiny hand-written drafts in every format vLLM serves (real safetensors, random small tensors,
milliseconds to write), for the synthetic verifiers of tests/synthetic.py."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from tests.synthetic import HIDDEN, LAYERS, VOCAB, write_checkpoint

DRAFT_VOCAB = 16


def _layer_config(hidden: int, vocab: int) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": hidden // 2,
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }


def _llama_layer(prefix: str, hidden: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}self_attn.q_proj.weight": (hidden, 2 * hidden),
        f"{prefix}self_attn.k_proj.weight": (hidden, 2 * hidden),
        f"{prefix}self_attn.v_proj.weight": (hidden, 2 * hidden),
        f"{prefix}self_attn.o_proj.weight": (hidden, hidden),
        f"{prefix}mlp.gate_proj.weight": (2 * hidden, hidden),
        f"{prefix}mlp.up_proj.weight": (2 * hidden, hidden),
        f"{prefix}mlp.down_proj.weight": (hidden, 2 * hidden),
        f"{prefix}input_layernorm.weight": (hidden,),
        f"{prefix}post_attention_layernorm.weight": (hidden,),
        f"{prefix}hidden_norm.weight": (hidden,),
    }


def vocab_maps(vocab: int = VOCAB, draft_vocab: int = DRAFT_VOCAB, shift: int = 0) -> dict[str, torch.Tensor]:
    """d2t/t2d for every (vocab // draft_vocab)-th token; `shift` pushes targets out of range."""
    keep = torch.arange(0, vocab, vocab // draft_vocab)[:draft_vocab]
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[keep] = True
    d2t = keep - torch.arange(draft_vocab) + shift
    return {"d2t": d2t.long(), "t2d": t2d}


def _write(folder: Path, cfg: dict, shapes: dict[str, tuple[int, ...]], extra: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    tensors = {k: torch.randn(*s, generator=g).to(torch.bfloat16) for k, s in shapes.items()}
    tensors.update(extra)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def speculators_draft(
    folder: Path,
    *,
    hidden: int = HIDDEN,
    vocab: int = VOCAB,
    aux_ids=(1, 2, 3),
    draft_vocab: int = DRAFT_VOCAB,
    shift: int = 0,
    kind: str = "eagle3",
    verifier_archs=("KimiK25ForConditionalGeneration",),
) -> Path:
    cfg = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": kind,
        "draft_vocab_size": draft_vocab,
        "eagle_aux_hidden_state_layer_ids": list(aux_ids),
        "norm_before_residual": True,
        "transformer_layer_config": _layer_config(hidden, vocab),
        "speculators_config": {
            "algorithm": kind,
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "somewhere", "architectures": list(verifier_archs)},
        },
    }
    if kind == "peagle":
        cfg["mask_token_id"] = 3
    shapes = {
        "fc.weight": (hidden, hidden * len(aux_ids)),
        "norm.weight": (hidden,),
        "lm_head.weight": (draft_vocab, hidden),
        **_llama_layer("layers.0.", hidden),
    }
    extra = vocab_maps(vocab, draft_vocab, shift) if draft_vocab < vocab else {}
    if kind == "peagle":
        extra["mask_hidden"] = torch.zeros(hidden * len(aux_ids))
    return _write(folder, cfg, shapes, extra)


def specforge_draft(
    folder: Path, arch: str = "LlamaForCausalLMEagle3", *, aux_ids=(1, 2, 3), hidden: int = HIDDEN
) -> Path:
    """As SpecForge saves one: a Llama config with eagle_config, midlayer.* weights, d2t/t2d."""
    cfg = {
        **_layer_config(hidden, VOCAB),
        "architectures": [arch],
        "draft_vocab_size": DRAFT_VOCAB,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux_ids), "use_aux_hidden_state": True},
    }
    if arch.startswith("Peagle") or arch == "PEagleDraftModel":
        cfg["mask_token_id"] = 3
    shapes = {
        "fc.weight": (hidden, hidden * len(aux_ids)),
        "norm.weight": (hidden,),
        "lm_head.weight": (DRAFT_VOCAB, hidden),
        "embed_tokens.weight": (VOCAB, hidden),
        **_llama_layer("midlayer.", hidden),
    }
    return _write(folder, cfg, shapes, vocab_maps())


def mla_draft(
    folder: Path,
    arch: str = "Eagle3DeepseekV3ForCausalLM",
    text_config: dict | None = None,
    aux_ids=(1, 2, 3),
    draft_vocab: int = DRAFT_VOCAB,
) -> Path:
    """An MLA EAGLE-3 draft: a DeepSeek-V3 config, one MLA + dense-MLP layer under midlayer.*.
    `text_config` (a verifier's) sets the widths; the default fits tests/synthetic.py."""
    tc = text_config or {
        "hidden_size": HIDDEN,
        "vocab_size": VOCAB,
        "num_attention_heads": 2,
        "q_lora_rank": 8,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
    }
    h, vocab, heads = tc["hidden_size"], tc["vocab_size"], tc["num_attention_heads"]
    q, kv, rope, nope, v = (
        tc[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    )
    # deepseek_v2: vLLM 0.32 rewrites a deepseek_v3 draft config into its MTP model (fit_check.MLA_AS_MTP)
    cfg = {
        "architectures": [arch],
        "model_type": "deepseek_v2",
        "hidden_size": h,
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "q_lora_rank": q,
        "kv_lora_rank": kv,
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": v,
        "intermediate_size": 2 * h,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
        "max_position_embeddings": 4096,
        "rope_theta": 50000.0,
        "tie_word_embeddings": False,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux_ids)},
    }
    p = "midlayer."
    shapes = {
        "fc.weight": (h, len(aux_ids) * h),
        "norm.weight": (h,),
        "lm_head.weight": (draft_vocab, h),
        f"{p}self_attn.q_a_proj.weight": (q, 2 * h),
        f"{p}self_attn.q_a_layernorm.weight": (q,),
        f"{p}self_attn.q_b_proj.weight": (heads * (nope + rope), q),
        f"{p}self_attn.kv_a_proj_with_mqa.weight": (kv + rope, 2 * h),
        f"{p}self_attn.kv_a_layernorm.weight": (kv,),
        f"{p}self_attn.kv_b_proj.weight": (heads * (nope + v), kv),
        f"{p}self_attn.o_proj.weight": (h, heads * v),
        f"{p}mlp.gate_proj.weight": (2 * h, h),
        f"{p}mlp.up_proj.weight": (2 * h, h),
        f"{p}mlp.down_proj.weight": (h, 2 * h),
        f"{p}input_layernorm.weight": (h,),
        f"{p}post_attention_layernorm.weight": (h,),
        f"{p}hidden_norm.weight": (h,),
    }
    return _write(folder, cfg, shapes, vocab_maps(vocab, draft_vocab) if draft_vocab < vocab else {})


def mtp_verifier(folder: Path, nextn: int = 1, with_layers: bool = True) -> Path:
    """A DeepSeek-V3-shaped text checkpoint whose config declares MTP layers (layer L onwards)."""
    from tests.synthetic import text_keys

    cfg = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "vocab_size": VOCAB,
        "num_attention_heads": 2,
        "kv_lora_rank": 8,
        "num_nextn_predict_layers": nextn,
        "tie_word_embeddings": False,
    }
    shapes = text_keys("")
    if with_layers:
        for i in range(LAYERS, LAYERS + nextn):
            p = f"model.layers.{i}."
            shapes.update(
                {
                    p + "enorm.weight": (HIDDEN,),
                    p + "hnorm.weight": (HIDDEN,),
                    p + "eh_proj.weight": (HIDDEN, 2 * HIDDEN),
                    p + "shared_head.norm.weight": (HIDDEN,),
                    p + "shared_head.head.weight": (VOCAB, HIDDEN),
                    p + "input_layernorm.weight": (HIDDEN,),
                }
            )
    return write_checkpoint(folder, cfg, shapes, num_shards=1)


def block_drafter(kind: str, verifier, out, layers: str = "1:0"):
    """A random-init speculators block drafter (`kind`: dflash, dflash2, dspark; Qwen3 layers; `layers`
    "N:i,j" = N layers, full attention at i, j, sliding elsewhere) for `verifier`, by speculators itself."""
    import speculators.models  # noqa: F401 (registers the draft types)
    import torch
    from speculators.model import SpeculatorModel
    from speculators.train.cli import create_transformer_layer_config

    n, full = layers.split(":")
    layer = create_transformer_layer_config(
        verifier_name_or_path=str(verifier), num_layers=int(n), draft_arch="qwen3", hidden_act=None,
        sliding_window=64, full_attention_indices=[int(x) for x in full.split(",") if x], mrope_full_head_hack=False,
    )  # fmt: skip
    kw = {"draft_vocab_size": layer.vocab_size, "block_size": 4, "verifier_name_or_path": str(verifier),
          "mask_token_id": 0, "draft_attn_impl": "sdpa", "target_layer_ids": None}  # fmt: skip
    extra = {"dspark": {"markov_rank": 16, "enable_confidence_head": True},
             "dflash2": {"selector_rank": 16, "selector_top_k": 4}}  # fmt: skip
    kw |= extra.get(kind, {})
    SpeculatorModel.registry[kind].from_training_args(verifier_config=layer, **kw).to(torch.bfloat16).save_pretrained(
        out
    )
    return out


def built_draft(layout, seed: int | None = None):
    """A one-layer EAGLE-3 draft built by speculators through the patched loader for `layout`
    (untrained; `seed` fixes its initial weights), reduced vocabulary with d2t/t2d."""
    from transformers import LlamaConfig

    from harness.verifier.loader import build_draft

    if seed is not None:
        torch.manual_seed(seed)
    maps = vocab_maps()
    return build_draft(
        layout,
        draft_layer_config=LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=HIDDEN,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=512,
        ),
        aux_layer_ids=[1, 2, 3],
        draft_vocab_size=DRAFT_VOCAB,
        t2d=maps["t2d"],
        d2t=maps["d2t"],
    )
