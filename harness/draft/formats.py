"""Which draft a folder holds, from the folder alone: every EAGLE-family or MTP format vLLM 0.32
serves, recognised from config.json, the safetensors headers and the small d2t/t2d tensors
(never the weights themselves).

Formats (docs/draft-formats.md has the detail and what each needs on a CPU):
  speculators   `speculators_model_type: eagle3` or `peagle` (what the harness trains), or `dflash`
                (a block drafter: vLLM method "dflash"; aux ids in `aux_hidden_state_layer_ids`)
  specforge     SpecForge / EAGLE reference checkpoints: `LlamaForCausalLMEagle3`,
                `Eagle3LlamaForCausalLM`, `Eagle3Qwen3ForCausalLM` and the Qwen-VL / MiniMax
                variants vLLM maps to its Llama EAGLE-3 layer; weights `midlayer.*`, aux ids
                in `eagle_config.eagle_aux_hidden_state_layer_ids`
  mla-eagle3    EAGLE-3 with a DeepSeek MLA layer: `Eagle3DeepseekV2ForCausalLM` / `…V3…`
  p-eagle       parallel-drafting EAGLE-3: `PEagleDraftModel`, `Peagle{Llama,Qwen3}ForCausalLM`
  mtp           a checkpoint's own multi-token-prediction layers (`num_nextn_predict_layers` > 0):
                the draft is the verifier itself (vLLM method "mtp")
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from harness.errors import BadInput
from harness.jsonfiles import read_checkpoint_config
from harness.provenance import content_hash
from harness.verifier.safetensors_index import TensorInfo, read_header, read_weight_map

LLAMA_EAGLE3_ARCHS = (
    "LlamaForCausalLMEagle3",
    "Eagle3LlamaForCausalLM",
    "Eagle3Qwen3ForCausalLM",
    "Eagle3Qwen2_5vlForCausalLM",
    "Eagle3Qwen3vlForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM",
)
MLA_EAGLE3_ARCHS = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")
PEAGLE_ARCHS = ("PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM")
SPECULATORS_TYPES = {"eagle3": "eagle3", "peagle": "p-eagle", "dflash": "dflash"}
# What the "unknown format" message lists.
KNOWN_FORMATS = (
    "speculators (speculators_model_type: eagle3 | peagle | dflash)",
    f"SpecForge/EAGLE-3 ({' | '.join(LLAMA_EAGLE3_ARCHS)})",
    f"MLA EAGLE-3 ({' | '.join(MLA_EAGLE3_ARCHS)})",
    f"P-EAGLE ({' | '.join(PEAGLE_ARCHS)})",
    "a verifier's own MTP layers (num_nextn_predict_layers > 0)",
)


@dataclass(frozen=True)
class DraftInfo:
    """A draft folder as vLLM will read it."""

    path: str
    format: str  # speculators | specforge | mla-eagle3 | p-eagle | mtp
    vllm_method: Literal["eagle3", "mtp", "dflash"]  # the speculative_config "method"
    parallel_drafting: bool  # P-EAGLE: vLLM needs speculative_config.parallel_drafting
    architecture: str
    num_layers: int  # draft decoder layers (MTP: prediction layers)
    hidden_size: int  # the draft's own width
    target_hidden_size: int  # the verifier width its fc reads (= hidden_size unless recorded)
    aux_layer_ids: tuple[int, ...]  # () = not recorded: vLLM uses the verifier's default
    draft_vocab_size: int
    target_vocab_size: int | None  # the vocab its embeddings / t2d are built for
    has_d2t: bool
    has_t2d: bool
    norm_before_residual: bool
    verifier: dict[str, Any]  # what it records about its verifier (may be empty)
    content_hash: dict[str, str]
    fc_shape: tuple[int, ...] | None  # [out, in] from the safetensors header
    d2t_target_range: tuple[int, int] | None  # (min, max) target id the d2t map produces
    t2d_selected: int | None  # how many target ids t2d marks
    weights: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)  # key -> shape
    harness_meta: dict[str, Any] = field(default_factory=dict, repr=False)  # harness.json, ours only
    model_type: str = ""  # the draft layer's config model_type

    @property
    def method(self) -> Literal["eagle3", "peagle", "mtp", "dflash"]:
        """The harness's method name (peagle is eagle3 with parallel drafting in vLLM)."""
        return "peagle" if self.parallel_drafting else self.vllm_method

    @property
    def is_verifier_itself(self) -> bool:
        return self.format == "mtp"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("weights")
        d.pop("harness_meta")
        d["method"] = self.method
        return d


def read_draft_config(folder: Path) -> dict[str, Any]:
    return read_checkpoint_config(
        folder,
        "point --draft at a draft checkpoint folder",
        "not a draft checkpoint (a draft folder holds config.json and its weights)",
    )


def detect_format(cfg: dict[str, Any], where: str) -> str:
    """The format name of a parsed config.json; BadInput naming the known ones otherwise."""
    stype = cfg.get("speculators_model_type")
    if stype is not None:
        if stype in SPECULATORS_TYPES:
            return "speculators"
        from harness.engine.method_limits import CPU_SERVING_LIMITS

        if stype in CPU_SERVING_LIMITS:
            raise BadInput(
                f"{where}: a speculators {stype} draft, which the harness does not bench yet "
                f"({CPU_SERVING_LIMITS[stype]})"
            )
        raise BadInput(
            f"{where}: speculators_model_type {stype!r} is not an EAGLE-family draft; "
            f"known formats: {'; '.join(KNOWN_FORMATS)}"
        )
    archs = [a for a in cfg.get("architectures") or [] if isinstance(a, str)]
    for fmt, names in (("specforge", LLAMA_EAGLE3_ARCHS), ("mla-eagle3", MLA_EAGLE3_ARCHS), ("p-eagle", PEAGLE_ARCHS)):
        if any(a in names for a in archs):
            return fmt
    text = cast("dict[str, Any]", cfg.get("text_config")) if isinstance(cfg.get("text_config"), dict) else cfg
    nextn = text.get("num_nextn_predict_layers")
    if isinstance(nextn, int) and nextn > 0:
        return "mtp"
    seen = f"architectures {archs}" if archs else "no architectures"
    if isinstance(nextn, int):
        seen += f", num_nextn_predict_layers={nextn} (a verifier without MTP layers)"
    raise BadInput(f"{where}: unknown draft format ({seen}); known formats: {'; '.join(KNOWN_FORMATS)}")


def _int(cfg: dict[str, Any], name: str, where: str, default: int | None = None) -> int:
    value = cfg.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(f"{where}: no valid {name} (got {value!r}); the draft config is incomplete")
    return value


def _weights(folder: Path) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """key -> shape and key -> shard, from headers only."""
    wm = read_weight_map(folder)
    shapes: dict[str, tuple[int, ...]] = {}
    for shard in sorted(wm.present):
        header: dict[str, TensorInfo] = read_header(folder / shard)
        shapes.update({k: v.shape for k, v in header.items()})
    if wm.structure_only:
        shapes = {}
    return shapes, dict(wm.weight_map)


def _vocab_maps(folder: Path, shards: dict[str, str], d2t_key: str | None, t2d_key: str | None):
    """(min, max) target id of d2t (target = draft + d2t[draft]) and t2d's count: both tensors
    are a few hundred KB at most, so they are read."""
    import torch
    from safetensors import safe_open

    rng = sel = None
    if d2t_key and d2t_key in shards and (folder / shards[d2t_key]).is_file():
        with safe_open(str(folder / shards[d2t_key]), "pt") as f:
            d2t = f.get_tensor(d2t_key).long()
        target = torch.arange(d2t.numel()) + d2t
        rng = (int(target.min()), int(target.max())) if d2t.numel() else None
    if t2d_key and t2d_key in shards and (folder / shards[t2d_key]).is_file():
        with safe_open(str(folder / shards[t2d_key]), "pt") as f:
            sel = int(f.get_tensor(t2d_key).bool().sum())
    return rng, sel


def _find(shapes: dict[str, tuple[int, ...]], name: str) -> str | None:
    """The key for a top-level tensor named `name` (e.g. "d2t", "fc.weight"), any prefix."""
    hits = sorted((k for k in shapes if k == name or k.endswith("." + name)), key=len)
    return hits[0] if hits else None


def inspect_draft(path: str | Path) -> DraftInfo:
    """Recognise and describe the draft in `path` (see the module docstring)."""
    folder = Path(path).expanduser()
    cfg = read_draft_config(folder)
    fmt = detect_format(cfg, str(folder / "config.json"))
    if fmt == "mtp":
        return _mtp_info(folder, cfg)
    return _eagle_info(folder, cfg, fmt)


def _eagle_info(folder: Path, cfg: dict[str, Any], fmt: str) -> DraftInfo:
    where = str(folder / "config.json")
    shapes, shards = _weights(folder)
    if fmt == "speculators":
        layer = cfg.get("transformer_layer_config") or {}
        if not isinstance(layer, dict):
            raise BadInput(f"{where}: transformer_layer_config is not an object; the speculators config is corrupt")
        parallel = cfg["speculators_model_type"] == "peagle"
        dflash = cfg["speculators_model_type"] == "dflash"
        fmt = "speculators"
        arch = f"speculators:{cfg['speculators_model_type']} ({layer.get('model_type', 'llama')} layer)"
        ids = cfg.get("aux_hidden_state_layer_ids" if dflash else "eagle_aux_hidden_state_layer_ids") or []
        verifier = dict((cfg.get("speculators_config") or {}).get("verifier") or {})
        nbr_default = not parallel  # vLLM's defaults for a speculators config (eagle3: True, peagle: False)
        nbr = bool(cfg.get("norm_before_residual", nbr_default))
    else:
        layer = cfg
        parallel, dflash = fmt == "p-eagle", False
        arch = next(a for a in cfg.get("architectures") or [] if isinstance(a, str))
        eagle_cfg = cast("dict[str, Any]", cfg.get("eagle_config")) if isinstance(cfg.get("eagle_config"), dict) else {}
        ids = cfg.get("eagle_aux_hidden_state_layer_ids") or eagle_cfg.get("eagle_aux_hidden_state_layer_ids") or []
        verifier = {k: cfg[k] for k in ("target_model", "base_model", "target_model_name_or_path") if k in cfg}
        nbr = bool(cfg.get("norm_before_residual", False))
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise BadInput(f"{where}: eagle_aux_hidden_state_layer_ids must be a list of integers (got {ids!r})")
    hidden = _int(layer, "hidden_size", where)
    vocab = layer.get("vocab_size")
    draft_vocab = cfg.get("draft_vocab_size") or vocab
    if not isinstance(draft_vocab, int):
        raise BadInput(f"{where}: neither draft_vocab_size nor vocab_size is set; the draft config is incomplete")
    meta_path = folder / "harness.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("verifier"):
        verifier = {**verifier, **{k: v for k, v in meta["verifier"].items() if k in ("name_or_path", "content_hash")}}
    d2t_key, t2d_key, fc_key = _find(shapes, "d2t"), _find(shapes, "t2d"), _find(shapes, "fc.weight")
    d2t_range, t2d_sel = _vocab_maps(folder, shards, d2t_key, t2d_key)
    return DraftInfo(
        path=str(folder.resolve()),
        format=fmt,
        vllm_method="dflash" if dflash else "eagle3",
        parallel_drafting=parallel,
        architecture=arch,
        num_layers=_int(layer, "num_hidden_layers", where, 1),
        hidden_size=hidden,
        target_hidden_size=int(cfg.get("target_hidden_size") or layer.get("target_hidden_size") or hidden),
        aux_layer_ids=tuple(ids),
        draft_vocab_size=draft_vocab,
        target_vocab_size=(shapes[t2d_key][0] if t2d_key else vocab),
        has_d2t=d2t_key is not None,
        has_t2d=t2d_key is not None,
        norm_before_residual=nbr,
        verifier=verifier,
        content_hash=content_hash(folder),
        fc_shape=shapes.get(fc_key) if fc_key else None,
        d2t_target_range=d2t_range,
        t2d_selected=t2d_sel,
        weights=shapes,
        harness_meta=meta,
        model_type=str(layer.get("model_type") or ""),
    )


def _mtp_info(folder: Path, cfg: dict[str, Any]) -> DraftInfo:
    where = str(folder / "config.json")
    text = cast("dict[str, Any]", cfg.get("text_config")) if isinstance(cfg.get("text_config"), dict) else cfg
    shapes, _ = _weights(folder)
    layers = _int(text, "num_hidden_layers", where)
    archs = [a for a in cfg.get("architectures") or [] if isinstance(a, str)]
    eh = [k for k in shapes if k.endswith(f"layers.{layers}.eh_proj.weight")]
    return DraftInfo(
        path=str(folder.resolve()),
        format="mtp",
        vllm_method="mtp",
        parallel_drafting=False,
        architecture=(archs[0] if archs else str(cfg.get("model_type"))) + " (own MTP layers)",
        num_layers=int(text["num_nextn_predict_layers"]),
        hidden_size=_int(text, "hidden_size", where),
        target_hidden_size=_int(text, "hidden_size", where),
        aux_layer_ids=(),
        draft_vocab_size=_int(text, "vocab_size", where),
        target_vocab_size=_int(text, "vocab_size", where),
        has_d2t=False,
        has_t2d=False,
        norm_before_residual=False,
        verifier={"name_or_path": str(folder.resolve()), "architectures": archs},
        content_hash=content_hash(folder),
        fc_shape=shapes.get(eh[0]) if eh else None,
        d2t_target_range=None,
        t2d_selected=None,
        weights=shapes,
    )
