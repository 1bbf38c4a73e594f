"""The draft's shape for a verifier: which verifier layers it reads, its decoder config, its
vocabulary bound. One place, used by training, the dry run and the reference drafts."""

from __future__ import annotations

from typing import Any

from harness.errors import BadInput
from harness.recipe import MASKED_METHODS, Recipe
from harness.verifier.layout import VerifierLayout, validate_aux_layer_ids


def aux_layer_ids(recipe: Recipe, layout: VerifierLayout) -> list[int]:
    ids = list(recipe.draft.aux_layer_ids or layout.default_aux_layer_ids)
    validate_aux_layer_ids(ids, layout.num_layers)
    return ids


def check_draft_vocab(recipe: Recipe, layout: VerifierLayout) -> None:
    if recipe.draft.draft_vocab_size > layout.vocab_size:
        raise BadInput(
            f"draft.draft_vocab_size {recipe.draft.draft_vocab_size} exceeds the verifier's vocabulary "
            f"({layout.vocab_size}); set it to at most {layout.vocab_size}"
        )


def draft_layer_config(recipe: Recipe, layout: VerifierLayout, max_model_len: int) -> dict[str, Any]:
    """The draft decoder's config values: LlamaConfig's (EAGLE-3 and P-EAGLE drafts are Llama layers in
    vLLM), or Qwen3Config's for DFlash (its layers are Qwen3's: q/k norms; every layer full attention,
    since vLLM-CPU's runner serves a DFlash draft of one attention type only, docs/facts.md §3)."""
    d, tc = recipe.draft, layout.text_config
    h = layout.hidden_size
    heads = d.num_attention_heads or layout.num_attention_heads
    qwen3 = (
        {"layer_types": ["full_attention"] * d.num_layers, "attention_bias": False, "use_sliding_window": False}
        if d.method == "dflash"
        else {}
    )
    return qwen3 | {
        "vocab_size": layout.vocab_size,
        "hidden_size": h,
        "intermediate_size": d.intermediate_size or 4 * h,
        "num_hidden_layers": d.num_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": d.num_key_value_heads or heads,
        "head_dim": d.head_dim or h // heads,
        "hidden_act": "silu",
        "max_position_embeddings": int(tc.get("max_position_embeddings") or max_model_len),
        "rms_norm_eps": float(tc.get("rms_norm_eps", 1e-6)),
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": float((layout.rope or {}).get("rope_theta", 10000.0)),
        },
        "tie_word_embeddings": False,
    }


def mask_token_id(recipe: Recipe, layout: VerifierLayout, tokenizer: Any) -> int | None:
    """P-EAGLE's and DFlash's mask token (None for other methods), in speculators' order: the recipe's, the
    tokenizer's mask token, the first embedding row past the tokenizer (no text maps to it; the draft
    learns its embedding); then, where speculators falls back to pad or eos, bos first: a trained row
    that means "nothing yet". On a bf16 machine's Kimi stand-in (CI data, 2 epochs) [BOS] gave depth-1/2
    held-out accuracy 0.53/0.54 where [PAD] (a never-trained, ~zero row) gave 0.29/0.29; on a float32
    machine's stand-in both read ~0.29/0.26 (P-EAGLE trains the embedding). Resolved here because
    speculators' own resolver loads the verifier's processor, which for Kimi-K2.5's multimodal config
    wants its image processor too."""
    if recipe.draft.method not in MASKED_METHODS:
        return None
    explicit = recipe.draft.mask_token_id
    if explicit is not None:
        if explicit >= layout.vocab_size:
            raise BadInput(
                f"draft.mask_token_id {explicit} is outside the verifier's vocabulary ({layout.vocab_size}); "
                f"use an id below it, or unset it to take the tokenizer's"
            )
        return explicit
    if tokenizer.mask_token_id is not None:
        return int(tokenizer.mask_token_id)
    if len(tokenizer) < layout.vocab_size:
        return len(tokenizer)
    for tid in (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    raise BadInput(
        f"draft.method {recipe.draft.method!r} needs a mask token: the tokenizer has none to offer; "
        "set draft.mask_token_id"
    )
