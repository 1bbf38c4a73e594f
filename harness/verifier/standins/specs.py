"""Tiny, architecture-faithful verifier specs: the same config structure as the real model,
with small numbers. Pure data: no torch, no files.

- kimi-k2.5: top-level `kimi_k25` multimodal wrapper, DeepSeek-V3 text model (MLA + MoE with
  routed and shared experts, first dense layer, sigmoid/noaux_tc routing, YaRN rope) nested in
  `text_config`, a small vision tower, weights under `language_model.`.
- deepseek-v3: the same text model as a plain text-only checkpoint. Its rope defaults to the
  plain ("default") type, whose vLLM-CPU kernel mishandles DeepSeek's 3-D query slices
  (docs/facts.md §7); it is the stand-in that exercises that path.
- llama: a plain dense Llama (GQA) checkpoint.

The CPU MLA kernel needs kv_lora_rank 512 and qk_rope_head_dim 64 even in a tiny model (docs/facts.md
§3), so those two keep their real values.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from harness.errors import BadInput
from harness.verifier.standins.corpus import Corpus
from harness.verifier.standins.tokenizer import BOS, EOS, IM_END, MEDIA_PAD, PAD

Arch = Literal["kimi-k2.5", "deepseek-v3", "llama"]
ARCHS: tuple[str, ...] = ("kimi-k2.5", "deepseek-v3", "llama")
# Bump when the builder's output changes for the same spec (invalidates caches).
BUILDER_VERSION = 3
# Bump when a thinking stand-in's reasoning spans change (harness/verifier/standins/pretrain.py).
THINKING_FORMAT = 3
# Bump when a padded stand-in's build changes (harness/verifier/standins/padded.py, build.py).
PADDED_FORMAT = 2


@dataclass(frozen=True)
class StandinSpec:
    arch: Arch
    num_layers: int
    hidden_size: int = 256
    vocab_size: int = 2048
    rope: Literal["yarn", "default"] = "yarn"
    # pretraining (deterministic: fixed steps, fixed data order, seeded init)
    pretrain_steps: int = 150
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3
    seed: int = 0
    # Kimi-K2.5's thinking format: `<think>`/`</think>` special tokens, a chat template that takes
    # `thinking` (default on), and pretraining on answers that think first (docs/facts.md §1).
    thinking: bool = False
    # Long-context tail: after the main schedule, long_steps more at long_seq_len-token windows (as
    # many tokens per step, the last learning rate held), so the stand-in still writes at the lengths
    # the long-document suites reach; 0 = none.
    long_seq_len: int = 0
    long_steps: int = 0
    # The production vocabulary (Kimi-K2.5's 163,840): the checkpoint's vocabulary when > vocab_size.
    # The vocab_size-token BPE's ordinary tokens are spread over the ids, the rest are reserved tokens
    # the text never uses (harness/verifier/standins/padded.py, docs/production-vocab.md); 0 = none.
    padded_vocab_size: int = 0
    # What it pretrains on (harness/verifier/standins/corpus.py): Python's docs, or a real chat
    # model's answers to the built-in training prompts ('smollm2-answers', chat-wrapped only).
    pretrain_text: Corpus = "pydoc"

    def __post_init__(self):
        if (self.long_seq_len > 0) != (self.long_steps > 0) or min(self.long_seq_len, self.long_steps) < 0:
            raise BadInput(
                f"stand-in long_seq_len {self.long_seq_len}, long_steps {self.long_steps}: the long-context "
                "tail needs both > 0 (e.g. 2048 and 60), or neither"
            )
        if self.pretrain_text not in get_args(Corpus):
            raise BadInput(
                f"stand-in pretrain_text {self.pretrain_text!r}: one of 'pydoc' (Python's docs, the default) "
                "or 'smollm2-answers' (SmolLM2-135M-Instruct's answers to the built-in training prompts)"
            )
        if self.padded_vocab_size and self.padded_vocab_size <= self.vocab_size:
            raise BadInput(
                f"stand-in padded_vocab_size {self.padded_vocab_size} must exceed vocab_size {self.vocab_size} "
                "(e.g. 163840, Kimi-K2.5's), or be 0 for none"
            )

    @property
    def model_vocab_size(self) -> int:
        """The checkpoint's vocabulary: config.json's vocab_size, the embedding's and lm_head's rows."""
        return self.padded_vocab_size or self.vocab_size

    @property
    def long_batch_size(self) -> int:
        return max(1, self.batch_size * self.seq_len // max(1, self.long_seq_len))

    def fingerprint(self, corpus_fp: str) -> str:
        fields = asdict(self)
        if not self.thinking:
            del fields["thinking"]  # specs from before the field keep their fingerprints (and caches)
        else:
            fields["thinking"] = THINKING_FORMAT
        for key in ("long_seq_len", "long_steps", "padded_vocab_size"):  # older specs keep their fingerprints
            if not fields[key]:
                del fields[key]
        if self.pretrain_text == "pydoc":
            del fields["pretrain_text"]  # the corpus fingerprint below already names the text
        if self.padded_vocab_size:
            fields["padded_format"] = PADDED_FORMAT
        from harness.hardware import cpu_compute_dtype

        # pretrained in float32 where bf16 is emulated: another stand-in (bf16 builds keep their fingerprints)
        if (compute := cpu_compute_dtype("bfloat16")) != "bfloat16":
            fields["pretrain_compute"] = compute
        blob = json.dumps({**fields, "corpus": corpus_fp, "v": BUILDER_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


DEFAULT_SPECS: dict[str, StandinSpec] = {
    "kimi-k2.5": StandinSpec("kimi-k2.5", num_layers=8, rope="yarn"),
    "deepseek-v3": StandinSpec("deepseek-v3", num_layers=8, rope="default", pretrain_steps=100),
    "llama": StandinSpec("llama", num_layers=12, rope="default", lr=2e-3),
}


def spec_for(arch: str, **overrides: Any) -> StandinSpec:
    if arch not in DEFAULT_SPECS:
        raise BadInput(f"unknown stand-in arch {arch!r}; choose one of: {', '.join(ARCHS)}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(DEFAULT_SPECS[arch], **overrides)


def _rope(spec: StandinSpec) -> dict[str, Any]:
    if spec.rope == "yarn":
        # Kimi-K2.5's own rope: YaRN x64 over 4096 original positions.
        return {
            "type": "yarn",
            "factor": 64.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        }
    return {}


def deepseek_text_config(spec: StandinSpec, model_type: str) -> dict[str, Any]:
    h = spec.hidden_size
    cfg: dict[str, Any] = {
        "model_type": model_type,
        "architectures": ["DeepseekV3ForCausalLM"],
        "vocab_size": spec.model_vocab_size,
        "hidden_size": h,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 2 * h,
        "moe_intermediate_size": h // 2,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.827,
        "q_lora_rank": h // 2,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 64,
        "qk_rope_head_dim": 64,
        "v_head_dim": 64,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 50000.0,
        "max_position_embeddings": 262144 if spec.rope == "yarn" else 4096,
        "num_nextn_predict_layers": 0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "initializer_range": 0.02,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "pad_token_id": PAD,
        "torch_dtype": "bfloat16",
    }
    rope = _rope(spec)
    if rope:
        cfg["rope_scaling"] = rope
    return cfg


def llama_config(spec: StandinSpec) -> dict[str, Any]:
    h = spec.hidden_size
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": spec.model_vocab_size,
        "hidden_size": h,
        "intermediate_size": 3 * h,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": h // 4,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "bos_token_id": BOS,
        "eos_token_id": [EOS, IM_END],
        "pad_token_id": PAD,
        "torch_dtype": "bfloat16",
    }


VISION_HIDDEN = 32
VISION_INTERMEDIATE = 64
VISION_POS = 8


def kimi_vision_config() -> dict[str, Any]:
    # Both spellings: the original checkpoint's (init_pos_emb_*, vt_*) and transformers'.
    return {
        "patch_size": 14,
        "init_pos_emb_height": VISION_POS,
        "init_pos_emb_width": VISION_POS,
        "init_pos_emb_time": 4,
        "pos_emb_height": VISION_POS,
        "pos_emb_width": VISION_POS,
        "pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "merge_kernel_size": [2, 2],
        "merge_type": "sd2_tpool",
        "video_attn_type": "spatial_temporal",
        "vt_hidden_size": VISION_HIDDEN,
        "hidden_size": VISION_HIDDEN,
        "vt_num_attention_heads": 2,
        "num_attention_heads": 2,
        "vt_num_hidden_layers": 1,
        "num_hidden_layers": 1,
        "vt_intermediate_size": VISION_INTERMEDIATE,
        "intermediate_size": VISION_INTERMEDIATE,
        "mm_hidden_size": VISION_HIDDEN,
        "mm_projector_type": "patchmerger",
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
    }


def checkpoint_config(spec: StandinSpec) -> dict[str, Any]:
    """The config.json of the stand-in checkpoint."""
    if spec.arch == "llama":
        return llama_config(spec)
    if spec.arch == "deepseek-v3":
        return deepseek_text_config(spec, "deepseek_v3")
    text = deepseek_text_config(spec, "kimi_k2")
    text.pop("torch_dtype")
    text["text_hidden_size"] = spec.hidden_size
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "text_config": text,
        "vision_config": {**kimi_vision_config(), "text_hidden_size": spec.hidden_size},
        "tie_word_embeddings": False,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "pad_token_id": PAD,
        "media_placeholder_token_id": MEDIA_PAD,
        "image_token_id": MEDIA_PAD,
        "projection_hidden_size": VISION_HIDDEN,
        "torch_dtype": "bfloat16",
    }


def hf_text_config_dict(spec: StandinSpec) -> dict[str, Any]:
    """The text model's config as transformers' own class reads it (kimi_k2 is deepseek_v3)."""
    if spec.arch == "llama":
        return llama_config(spec)
    return deepseek_text_config(spec, "deepseek_v3")
