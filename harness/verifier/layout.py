"""VerifierLayout: the loader's view of a checkpoint, from config.json and the index alone.

`resolve_layout(path)` is a pure function of the folder's metadata (config.json, the index and,
where the shards are present, their safetensors headers): it never reads weight bytes. It says
which text model sits inside the checkpoint and exactly which tensors an EAGLE-3 draft borrows
from it (embed_tokens, lm_head, final norm), by key and shard. Ambiguity is never resolved
silently: the text model's own prefix wins and the other candidates are recorded, or it refuses.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.jsonfiles import read_checkpoint_config
from harness.verifier.safetensors_index import check_shards, read_header, read_weight_map

DEEPSEEK_FAMILY = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})

# Suffixes (dotted) under which each borrowed tensor may appear, most usual first.
ROLE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "embed_tokens": ("embed_tokens.weight", "tok_embeddings.weight", "wte.weight"),
    "lm_head": ("lm_head.weight", "output.weight"),
    "final_norm": ("norm.weight", "final_layernorm.weight", "ln_f.weight"),
}

_LAYER_RE = re.compile(r"^(.*?)layers\.(\d+)\.")


@dataclass(frozen=True)
class TensorRef:
    role: str
    key: str
    shard: str
    expected_shape: tuple[int, ...]
    shape: tuple[int, ...] | None = None  # None when the shard is not on disk (structure only)
    dtype: str | None = None


@dataclass(frozen=True)
class VerifierLayout:
    path: str
    model_type: str
    architectures: tuple[str, ...]
    multimodal: bool
    text_model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    attention: str  # "mla", or by key/value heads: "mha" (as many as query heads), "gqa" (fewer), "mqa" (one)
    moe: dict[str, Any] | None
    rope: dict[str, Any] | None
    tie_word_embeddings: bool
    quantization: dict[str, Any] | None
    text_prefix: str  # prepended to a plain causal-LM key ("model.layers.0...") in this checkpoint
    decoder_prefix: str  # where the decoder layers live, e.g. "language_model.model.layers."
    embed_tokens: TensorRef
    lm_head: TensorRef  # the embedding itself when tied
    final_norm: TensorRef
    default_aux_layer_ids: tuple[int, ...]
    num_tensors: int
    num_shards: int
    structure_only: bool
    eos_token_ids: tuple[int, ...] = ()
    ignored_candidates: dict[str, tuple[str, ...]] = field(default_factory=dict)
    text_config: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def deepseek_family(self) -> bool:
        return self.text_model_type in DEEPSEEK_FAMILY

    @property
    def rope_type(self) -> str:
        return str((self.rope or {}).get("rope_type", "default"))

    def to_dict(self, with_text_config: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not with_text_config:
            d.pop("text_config")
        return d


def load_config(folder: Path) -> dict[str, Any]:
    return read_checkpoint_config(
        folder,
        "point the verifier at a checkpoint folder (config.json + safetensors)",
        "a verifier folder needs config.json next to its safetensors weights",
    )


def text_config_of(cfg: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The text model's config and whether it was nested (multimodal wrapper)."""
    tc = cfg.get("text_config")
    if isinstance(tc, dict):
        return tc, True
    return cfg, False


def _require_int(tc: dict[str, Any], name: str, where: str) -> int:
    value = tc.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(f"{where}: text config has no valid {name} (got {value!r}); is this a causal LM checkpoint?")
    return value


def default_aux_layer_ids(num_layers: int) -> tuple[int, ...]:
    """vLLM's default EAGLE-3 aux layers (2, L//2, L-3); (2, 30, 58) for a 61-layer model."""
    return (2, num_layers // 2, num_layers - 3)


def validate_aux_layer_ids(ids: list[int] | tuple[int, ...], num_layers: int) -> None:
    """Aux id i = the residual stream entering decoder layer i (vLLM); ids must be 1..L-1, distinct.

    Id 0 crashes DeepSeek/Kimi verifiers in vLLM and id L is never collected, so both are refused.
    """
    ids = list(ids)
    if len(ids) < 1:
        raise BadInput("aux_layer_ids: empty; give the verifier layers the draft reads, e.g. [2, L//2, L-3]")
    if len(set(ids)) != len(ids):
        raise BadInput(f"aux_layer_ids {ids}: repeated ids; EAGLE-3 needs distinct layers")
    bad = [i for i in ids if not 1 <= i <= num_layers - 1]
    if bad:
        raise BadInput(
            f"aux_layer_ids {ids}: {bad} out of range for a {num_layers}-layer verifier; use ids in 1..{num_layers - 1}"
        )


def _decoder_roots(keys: list[str], num_layers: int) -> list[str]:
    """Prefixes (ending in '.' or empty) under which layers 0..L-1 all exist."""
    seen: dict[str, set[int]] = {}
    for k in keys:
        m = _LAYER_RE.match(k)
        if m:
            seen.setdefault(m.group(1), set()).add(int(m.group(2)))
    want = set(range(num_layers))
    return sorted(p for p, idx in seen.items() if want <= idx)


def _candidates(keys: list[str], role: str, exclude_prefix: str | None) -> list[str]:
    out = []
    for k in keys:
        if exclude_prefix is not None and k.startswith(exclude_prefix):
            continue  # per-layer tensors (an MTP layer's embed_tokens lives under layers.N)
        for s in ROLE_SUFFIXES[role]:
            if k == s or k.endswith("." + s):
                out.append(k)
                break
    return out


def _pick(
    role: str, expected: str, text_prefix: str, cands: list[str], where: str, override: str | None, keys: set[str]
) -> tuple[str | None, tuple[str, ...]]:
    """The text model's own tensor for `role`, and the other candidates that were passed over.

    Only a candidate under the text model's prefix is ever picked without being named; one
    outside it (a vision tower's final_layernorm, an MTP block's embed_tokens) needs an override.
    """
    if override:
        if override not in keys:
            raise BadInput(f"{where}: weight key {override!r} (set for {role}) is not in the checkpoint")
        return override, tuple(c for c in cands if c != override)
    if expected in keys:
        return expected, tuple(c for c in cands if c != expected)
    inside = [c for c in cands if c.startswith(text_prefix)]
    if len(inside) == 1:
        return inside[0], tuple(c for c in cands if c != inside[0])
    if not inside:
        if cands:
            raise BadInput(
                f"{where}: no {role} under the text model's prefix {text_prefix!r}; only outside it "
                f"({', '.join(cands[:4])}); if one is right, name it with verifier.weight_keys.{role}"
            )
        return None, ()
    raise BadInput(
        f"{where}: {len(inside)} candidates for {role} ({', '.join(inside[:4])}); "
        f"choose one with verifier.weight_keys.{role} in the recipe"
    )


def _quantization(cfg: dict[str, Any], tc: dict[str, Any]) -> dict[str, Any] | None:
    qc = cfg.get("quantization_config") or tc.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    out: dict[str, Any] = {"method": qc.get("quant_method"), "format": qc.get("format")}
    groups = qc.get("config_groups") or {}
    for g in groups.values():
        w = (g or {}).get("weights") or {}
        out.update(
            bits=w.get("num_bits"),
            type=w.get("type"),
            group_size=w.get("group_size"),
            symmetric=w.get("symmetric"),
            strategy=w.get("strategy"),
            targets=g.get("targets"),
        )
        break
    if qc.get("ignore"):
        ign = list(qc["ignore"])
        out["ignore"] = ign[:6] + ([f"... {len(ign) - 6} more"] if len(ign) > 6 else [])
    return {k: v for k, v in out.items() if v is not None}


def _eos_ids(folder: Path, cfg: dict[str, Any], tc: dict[str, Any]) -> tuple[int, ...]:
    """Stop tokens from config.json and generation_config.json (Kimi's chat stop, <|im_end|>,
    is only in the latter)."""
    found: list[int] = []
    sources = [cfg.get("eos_token_id", tc.get("eos_token_id"))]
    gen = folder / "generation_config.json"
    if gen.is_file():
        try:
            sources.append(json.loads(gen.read_text()).get("eos_token_id"))
        except (ValueError, AttributeError):
            pass  # a broken generation config changes no tensor; vLLM will report it itself
    for eos in sources:
        for i in eos if isinstance(eos, list) else [eos]:
            if isinstance(i, int) and i not in found:
                found.append(i)
    return tuple(found)


def _text_model_root(folder: Path, keys: list[str], num_layers: int) -> str:
    """The weight prefix of the text model's decoder stack (e.g. 'language_model.model.')."""
    keyset = set(keys)
    roots = _decoder_roots(keys, num_layers)
    if not roots:
        raise BadInput(
            f"{folder}: no decoder layers 0..{num_layers - 1} in the weights although config.json says "
            f"num_hidden_layers={num_layers}; the config and weights do not belong together"
        )
    if len(roots) > 1:
        # Prefer the one whose embed_tokens sits beside it; otherwise refuse.
        with_embed = [r for r in roots if r + "embed_tokens.weight" in keyset]
        if len(with_embed) != 1:
            raise BadInput(
                f"{folder}: several decoder stacks with {num_layers} layers ({', '.join(roots)}); "
                "cannot tell the text model"
            )
        roots = with_embed
    return roots[0]


_WHAT = {"embed_tokens": "token embedding", "final_norm": "final norm", "lm_head": "lm_head"}


def _pick_borrowed(
    folder: Path, keys: list[str], root: str, text_prefix: str, tie: bool | None, weight_keys: dict[str, str]
) -> tuple[dict[str, str], dict[str, tuple[str, ...]], bool]:
    """The keys of embed_tokens, final_norm and lm_head (decoys ignored), and whether lm_head is tied."""
    keyset = set(keys)
    picks: dict[str, str] = {}
    ignored: dict[str, tuple[str, ...]] = {}
    expected = {
        "embed_tokens": root + "embed_tokens.weight",
        "final_norm": root + "norm.weight",
        "lm_head": text_prefix + "lm_head.weight",
    }
    for role in ("embed_tokens", "final_norm", "lm_head"):
        cands = _candidates(keys, role, root + "layers.")
        key, others = _pick(role, expected[role], text_prefix, cands, str(folder), weight_keys.get(role), keyset)
        if others:
            ignored[role] = others
        if key is None:
            if role == "lm_head" and tie is not False:
                continue
            extra = " and tie_word_embeddings is false" if role == "lm_head" else ""
            raise BadInput(
                f"{folder}: no {_WHAT[role]} tensor found (looked for {expected[role]}{extra}); "
                f"set verifier.weight_keys.{role} in the recipe to its key"
            )
        picks[role] = key
    if tie is None:
        tie = "lm_head" not in picks
    if tie:
        picks["lm_head"] = picks["embed_tokens"]
    return picks, ignored, bool(tie)


def _tensor_refs(folder: Path, wm, picks: dict[str, str], vocab: int, hidden: int) -> dict[str, TensorRef]:
    """Where each borrowed tensor lives, checked against the text config's shapes (headers only)."""
    expected_shapes = {"embed_tokens": (vocab, hidden), "lm_head": (vocab, hidden), "final_norm": (hidden,)}
    headers: dict[str, dict] = {}
    refs: dict[str, TensorRef] = {}
    for role, key in picks.items():
        shard = wm.weight_map[key]
        shape = dtype = None
        if shard in wm.present:
            if shard not in headers:
                headers[shard] = read_header(folder / shard)
            info = headers[shard].get(key)
            if info is None:
                raise BadInput(
                    f"{folder / shard}: the index places {key} here but the shard does not hold it; fix the index"
                )
            shape, dtype = info.shape, info.dtype
            if shape != expected_shapes[role]:
                raise BadInput(
                    f"{folder / shard}: {key} has shape {list(shape)} but the text config says "
                    f"{list(expected_shapes[role])} (vocab_size={vocab}, hidden_size={hidden}); "
                    "config.json and the weights disagree"
                )
        refs[role] = TensorRef(role, key, shard, expected_shapes[role], shape, dtype)
    return refs


def attention_kind(tc: dict[str, Any], heads: int) -> str:
    """MLA (a latent KV: DeepSeek-V3, Kimi), else by key/value heads against query heads: MHA, GQA, MQA
    (num_key_value_heads absent means one per query head, as transformers reads it)."""
    if tc.get("kv_lora_rank"):
        return "mla"
    kv = tc.get("num_key_value_heads") or heads
    return "mha" if kv == heads else "mqa" if kv == 1 else "gqa"


def _moe_of(tc: dict[str, Any]) -> dict[str, Any] | None:
    if not (tc.get("n_routed_experts") or tc.get("num_local_experts") or tc.get("num_experts")):
        return None
    return {
        k: tc[k]
        for k in (
            "n_routed_experts",
            "num_local_experts",
            "num_experts",
            "n_shared_experts",
            "num_experts_per_tok",
            "first_k_dense_replace",
            "moe_intermediate_size",
            "scoring_func",
            "topk_method",
            "routed_scaling_factor",
        )
        if k in tc
    }


def _rope_of(tc: dict[str, Any]) -> dict[str, Any]:
    rope = tc.get("rope_parameters") or tc.get("rope_scaling")
    rope = dict(rope) if isinstance(rope, dict) else {}
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
    rope.setdefault("rope_type", "default")
    if "rope_theta" in tc:
        rope.setdefault("rope_theta", tc["rope_theta"])
    return rope


def resolve_layout(path: str | Path, weight_keys: dict[str, str] | None = None) -> VerifierLayout:
    """Resolve a verifier checkpoint folder into a VerifierLayout (see module docstring)."""
    folder = Path(path).expanduser()
    cfg = load_config(folder)
    tc, nested = text_config_of(cfg)
    where = str(folder / "config.json")
    num_layers = _require_int(tc, "num_hidden_layers", where)
    hidden = _require_int(tc, "hidden_size", where)
    vocab = _require_int(tc, "vocab_size", where)
    heads = _require_int(tc, "num_attention_heads", where)
    wm = read_weight_map(folder)
    check_shards(folder, wm)  # truncated or inconsistent files are caught here, not by the engine
    keys = list(wm.weight_map)
    root = _text_model_root(folder, keys, num_layers)
    text_prefix = root[: -len("model.")] if root.endswith("model.") else root
    picks, ignored, tie = _pick_borrowed(
        folder,
        keys,
        root,
        text_prefix,
        tc.get("tie_word_embeddings", cfg.get("tie_word_embeddings")),
        weight_keys or {},
    )
    refs = _tensor_refs(folder, wm, picks, vocab, hidden)
    return VerifierLayout(
        path=str(folder.resolve()),
        model_type=str(cfg.get("model_type", "")),
        architectures=tuple(cfg.get("architectures") or ()),
        multimodal=nested,
        text_model_type=str(tc.get("model_type", cfg.get("model_type", ""))),
        num_layers=num_layers,
        hidden_size=hidden,
        vocab_size=vocab,
        num_attention_heads=heads,
        attention=attention_kind(tc, heads),
        moe=_moe_of(tc),
        rope=_rope_of(tc),
        tie_word_embeddings=bool(tie),
        quantization=_quantization(cfg, tc),
        text_prefix=text_prefix,
        decoder_prefix=root + "layers.",
        embed_tokens=refs["embed_tokens"],
        lm_head=refs["lm_head"],
        final_norm=refs["final_norm"],
        default_aux_layer_ids=default_aux_layer_ids(num_layers),
        num_tensors=len(keys),
        num_shards=len(wm.shards),
        structure_only=wm.structure_only,
        eos_token_ids=_eos_ids(folder, cfg, tc),
        ignored_candidates=ignored,
        text_config=tc,
    )
