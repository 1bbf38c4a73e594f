"""Structure-only reconstructions of real verifier checkpoints, for testing without weights.

`write_reference("kimi-k2.5", out_dir)` writes config.json, generation_config.json and a generated
model.safetensors.index.json naming every tensor of moonshotai/Kimi-K2.5 (208,550 keys over 64
shards, ~554 GiB) but no shard files, so `resolve_layout` can be checked against the real
structure offline. It is a reconstruction, not a download: the key names, shapes, dtypes and shard
placement follow a published dump of the real checkpoint's tensor list and vLLM's Kimi-K2.5 loader;
where those are silent (the exact key order inside the index, raw-config details) it is a guess.
Sources and guesses are noted in reference_data/kimi_k25/README.md.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from math import prod
from pathlib import Path

from harness.errors import BadInput

DATA_DIR = Path(__file__).parent / "reference_data"

# (key, shape, dtype) of one tensor; the index only stores key -> shard, the rest sizes total_size.
Tensor = tuple[str, tuple[int, ...], str]
_BYTES = {"BF16": 2, "F32": 4, "I32": 4}


@dataclass(frozen=True)
class Reference:
    folder: str  # under reference_data/
    num_shards: int
    description: str


REFERENCES: dict[str, Reference] = {
    "kimi-k2.5": Reference("kimi_k25", 64, "moonshotai/Kimi-K2.5, int4 compressed-tensors experts"),
}


# --- Kimi-K2.5 key generators, one per block ------------------------------------------------


def _k25_attention(p: str, tc: dict) -> Iterator[Tensor]:
    h, heads = tc["hidden_size"], tc["num_attention_heads"]
    q_rank, kv_rank = tc["q_lora_rank"], tc["kv_lora_rank"]
    nope, rope, v = tc["qk_nope_head_dim"], tc["qk_rope_head_dim"], tc["v_head_dim"]
    yield f"{p}input_layernorm.weight", (h,), "BF16"
    yield f"{p}post_attention_layernorm.weight", (h,), "BF16"
    a = p + "self_attn."
    yield f"{a}q_a_proj.weight", (q_rank, h), "BF16"
    yield f"{a}q_a_layernorm.weight", (q_rank,), "BF16"
    yield f"{a}q_b_proj.weight", (heads * (nope + rope), q_rank), "BF16"
    yield f"{a}kv_a_proj_with_mqa.weight", (kv_rank + rope, h), "BF16"
    yield f"{a}kv_a_layernorm.weight", (kv_rank,), "BF16"
    yield f"{a}kv_b_proj.weight", (heads * (nope + v), kv_rank), "BF16"
    yield f"{a}o_proj.weight", (h, heads * v), "BF16"


def _k25_dense_mlp(p: str, tc: dict, inter: int) -> Iterator[Tensor]:
    h = tc["hidden_size"]
    yield f"{p}gate_proj.weight", (inter, h), "BF16"
    yield f"{p}up_proj.weight", (inter, h), "BF16"
    yield f"{p}down_proj.weight", (h, inter), "BF16"


def _k25_routed_experts(p: str, tc: dict, bits: int, group: int) -> Iterator[Tensor]:
    """compressed-tensors pack-quantized: int32 words of 32/bits values, one scale per group."""
    h, inter, per_word = tc["hidden_size"], tc["moe_intermediate_size"], 32 // bits
    projs = {"gate_proj": (inter, h), "up_proj": (inter, h), "down_proj": (h, inter)}
    for e in range(tc["n_routed_experts"]):
        for name, (rows, cols) in projs.items():
            q = f"{p}experts.{e}.{name}."
            yield q + "weight_packed", (rows, cols // per_word), "I32"
            yield q + "weight_scale", (rows, cols // group), "BF16"
            yield q + "weight_shape", (2,), "I32"


def _k25_moe(p: str, tc: dict, bits: int, group: int) -> Iterator[Tensor]:
    yield f"{p}gate.weight", (tc["n_routed_experts"], tc["hidden_size"]), "BF16"
    yield f"{p}gate.e_score_correction_bias", (tc["n_routed_experts"],), "F32"
    yield from _k25_routed_experts(p, tc, bits, group)
    shared = tc["moe_intermediate_size"] * tc["n_shared_experts"]
    yield from _k25_dense_mlp(p + "shared_experts.", tc, shared)


def _k25_layer(i: int, tc: dict, bits: int, group: int) -> Iterator[Tensor]:
    p = f"language_model.model.layers.{i}."
    yield from _k25_attention(p, tc)
    if i < tc["first_k_dense_replace"]:
        yield from _k25_dense_mlp(p + "mlp.", tc, tc["intermediate_size"])
    else:
        yield from _k25_moe(p + "mlp.", tc, bits, group)


def _k25_text_outer(tc: dict) -> Iterator[Tensor]:
    h, vocab = tc["hidden_size"], tc["vocab_size"]
    yield "language_model.lm_head.weight", (vocab, h), "BF16"
    yield "language_model.model.embed_tokens.weight", (vocab, h), "BF16"
    yield "language_model.model.norm.weight", (h,), "BF16"


def _k25_projector(vc: dict) -> Iterator[Tensor]:
    """PatchMerger MLP: LayerNorm(vt_hidden), Linear(merged, merged), GELU, Linear(merged, text)."""
    d = vc["mm_hidden_size"]
    merged = d * prod(vc["merge_kernel_size"])
    yield "mm_projector.pre_norm.weight", (d,), "BF16"
    yield "mm_projector.pre_norm.bias", (d,), "BF16"
    yield "mm_projector.proj.0.weight", (merged, merged), "BF16"
    yield "mm_projector.proj.0.bias", (merged,), "BF16"
    yield "mm_projector.proj.2.weight", (vc["text_hidden_size"], merged), "BF16"
    yield "mm_projector.proj.2.bias", (vc["text_hidden_size"],), "BF16"


def _k25_vision_tower(vc: dict) -> Iterator[Tensor]:
    """MoonViT-3D: patch embedding with a learned 2D position table, 27 pre-norm blocks."""
    d, inter, ps = vc["vt_hidden_size"], vc["vt_intermediate_size"], vc["patch_size"]
    v = "vision_tower."
    yield f"{v}patch_embed.proj.weight", (d, 3, ps, ps), "BF16"
    yield f"{v}patch_embed.proj.bias", (d,), "BF16"
    pos = (vc["init_pos_emb_height"], vc["init_pos_emb_width"], d)
    yield f"{v}patch_embed.pos_emb.weight", pos, "BF16"
    for b in range(vc["vt_num_hidden_layers"]):
        p = f"{v}encoder.blocks.{b}."
        for name, shape in (("norm0", (d,)), ("norm1", (d,))):
            yield f"{p}{name}.weight", shape, "BF16"
            yield f"{p}{name}.bias", shape, "BF16"
        for name, (rows, cols) in (
            ("wqkv", (3 * d, d)),
            ("wo", (d, d)),
            ("mlp.fc0", (inter, d)),
            ("mlp.fc1", (d, inter)),
        ):
            yield f"{p}{name}.weight", (rows, cols), "BF16"
            yield f"{p}{name}.bias", (rows,), "BF16"
    yield f"{v}encoder.final_layernorm.weight", (d,), "BF16"
    yield f"{v}encoder.final_layernorm.bias", (d,), "BF16"


def kimi_k25_shards(cfg: dict) -> list[list[Tensor]]:
    """Tensors per shard, in order: one decoder layer per shard (layer i in shard i+1), then
    embed/lm_head/norm, then the projector, then the vision tower (64 shards for 61 layers)."""
    tc, vc = cfg["text_config"], cfg["vision_config"]
    w = cfg["quantization_config"]["config_groups"]["group_0"]["weights"]
    bits, group = w["num_bits"], w["group_size"]
    shards = [list(_k25_layer(i, tc, bits, group)) for i in range(tc["num_hidden_layers"])]
    shards.append(list(_k25_text_outer(tc)))
    shards.append(list(_k25_projector(vc)))
    shards.append(list(_k25_vision_tower(vc)))
    return shards


def _nbytes(t: Tensor) -> int:
    return prod(t[1]) * _BYTES[t[2]]


def write_reference(name: str, out_dir: Path) -> Path:
    """Write the named reference checkpoint's metadata (no weights) into out_dir; return out_dir."""
    ref = REFERENCES.get(name)
    if ref is None:
        known = ", ".join(sorted(REFERENCES))
        raise BadInput(f"unknown reference checkpoint {name!r}; known: {known}")
    src = DATA_DIR / ref.folder
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        shutil.copyfile(src / f, out_dir / f)
    cfg = json.loads((src / "config.json").read_text())
    shards = kimi_k25_shards(cfg)
    if len(shards) != ref.num_shards:
        raise AssertionError(f"{name}: generated {len(shards)} shards, expected {ref.num_shards}")
    weight_map: dict[str, str] = {}
    total = 0
    for n, tensors in enumerate(shards, start=1):
        shard = f"model-{n:05d}-of-{ref.num_shards:06d}.safetensors"
        for t in tensors:
            weight_map[t[0]] = shard
            total += _nbytes(t)
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return out_dir
