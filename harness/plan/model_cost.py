"""What one token costs a verifier, from its config alone (no weights): its parameters (all of them,
and the ones a token multiplies through), the FLOPs of its forward per token, and the weight bytes a
decode step reads. The cost model (harness/plan/figures.py) scales the throughput it measured on one
model to another by these. Pure.

  active params   attention (MLA or MHA/GQA) + the MLP a token runs through (in a MoE layer: the
                  routed experts it picks, the shared experts, the router) per layer, + the LM head
                  over the vocabulary; the embedding is a lookup, not a matmul
  total params    every weight of the text model: embedding, every expert, norms, the LM head
                  (tied to the embedding: counted once)
  FLOPs / token   2 x active params + attention over `context` earlier positions
                  (2 x heads x (qk + v head dim) x context per layer: the scores and the weighted sum)
  decode bytes    active params x bytes per weight: the weights one decode step reads for one token
                  (a batch of several reads more of a MoE's experts; a dense model's are all read once)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8": 1, "int4": 0.5}


@dataclass(frozen=True)
class Params:
    total: int
    active: int

    @property
    def matmul_flops(self) -> float:
        """FLOPs of one token's weight matmuls: 2 x active params (attention over the context apart)."""
        return 2.0 * self.active


def params(tc: dict[str, Any]) -> Params | None:
    """The text model's total and per-token active parameters; None when the config lacks a size."""
    try:
        h, layers, vocab = tc["hidden_size"], tc["num_hidden_layers"], tc["vocab_size"]
        attn, attn_norms = _mla(tc) if "kv_lora_rank" in tc else (_gqa(tc), 0)
        mlp_active, mlp_total = _mlp(tc)
    except (KeyError, TypeError):
        return None
    head = vocab * h
    embedding = 0 if tc.get("tie_word_embeddings") else vocab * h
    norms = layers * (2 * h + attn_norms) + h
    return Params(
        total=int(layers * attn + mlp_total + norms + head + embedding),
        active=int(layers * attn + mlp_active + head),
    )


def active_params(tc: dict[str, Any]) -> int | None:
    """Weights one token's forward multiplies through (2 FLOPs each); None when the config lacks a size."""
    p = params(tc)
    return None if p is None else p.active


def _mla(tc: dict[str, Any]) -> tuple[int, int]:
    """Multi-head latent attention (DeepSeek-V3, Kimi): its matmul weights and its two latent norms."""
    h, heads, rank, rope = tc["hidden_size"], tc["num_attention_heads"], tc["kv_lora_rank"], tc["qk_rope_head_dim"]
    qk = tc["qk_nope_head_dim"] + rope
    q_rank = tc.get("q_lora_rank")
    q = h * q_rank + q_rank * heads * qk if q_rank else h * heads * qk
    kv = h * (rank + rope) + rank * heads * (tc["qk_nope_head_dim"] + tc["v_head_dim"])
    return q + kv + heads * tc["v_head_dim"] * h, rank + (q_rank or 0)


def _gqa(tc: dict[str, Any]) -> int:
    """Multi-head or grouped-query attention: q and o over every head, k and v over the KV heads."""
    h, heads = tc["hidden_size"], tc["num_attention_heads"]
    hd, kv = tc.get("head_dim") or h // heads, tc.get("num_key_value_heads") or heads
    return 2 * h * heads * hd + 2 * h * kv * hd


def _mlp(tc: dict[str, Any]) -> tuple[int, int]:
    """(active, total) MLP weights over all layers: gate, up and down projections (3 x hidden x width)."""
    h, layers = tc["hidden_size"], tc["num_hidden_layers"]
    dense = 3 * h * tc["intermediate_size"]
    routed = tc.get("n_routed_experts")
    if not routed:
        return layers * dense, layers * dense
    first_dense = tc.get("first_k_dense_replace", 0)
    expert, shared = 3 * h * tc["moe_intermediate_size"], tc.get("n_shared_experts") or 0
    router = h * routed + routed  # the gate's weights and its score-correction bias
    active = (tc["num_experts_per_tok"] + shared) * expert + router
    total = (routed + shared) * expert + router
    moe_layers = layers - first_dense
    return first_dense * dense + moe_layers * active, first_dense * dense + moe_layers * total


def attention_flops(tc: dict[str, Any], context: float) -> float:
    """FLOPs one token spends attending to `context` earlier positions, over all layers."""
    heads, layers = tc.get("num_attention_heads", 0), tc.get("num_hidden_layers", 0)
    if "kv_lora_rank" in tc:
        qk, v = tc["qk_nope_head_dim"] + tc["qk_rope_head_dim"], tc["v_head_dim"]
    else:
        qk = v = tc.get("head_dim") or tc.get("hidden_size", 0) // max(heads, 1)
    return 2.0 * layers * heads * (qk + v) * context


def flops_per_token(tc: dict[str, Any], context: float = 0.0) -> float | None:
    """FLOPs of one token's forward: 2 x active params + attention over `context` positions."""
    p = params(tc)
    return None if p is None else p.matmul_flops + attention_flops(tc, context)


def decode_bytes(tc: dict[str, Any], dtype: str = "bfloat16") -> float | None:
    """Weight bytes one decode step reads for a token: its active parameters at `dtype`."""
    active = active_params(tc)
    return None if active is None else active * BYTES[dtype]
