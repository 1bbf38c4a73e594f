"""Convert a speculators EAGLE-3 draft into the SpecForge/EAGLE-3 layout, same weights.

The SpecForge layout is what vLLM's `Eagle3LlamaForCausalLM` loads for a `LlamaForCausalLMEagle3`
checkpoint (docs/draft-formats.md):
  config.json   a plain Llama config (the draft layer: hidden, heads, rope, `vocab_size` = the
                verifier's) plus `architectures: ["LlamaForCausalLMEagle3"]`, `draft_vocab_size`,
                `eagle_config.eagle_aux_hidden_state_layer_ids` and the layer-variant switches
                (`norm_before_residual`, `norm_before_fc`, `fc_norm`, `norm_output`,
                `target_hidden_size`) that vLLM reads from the config's top level
  weights       `midlayer.*` for decoder layer 0 (vLLM renames it back to `layers.0.*`), `fc.weight`,
                `norm.weight`, `lm_head.weight`, `embed_tokens.weight` when the draft has its own,
                `d2t` (int64, target = draft + d2t[draft]) and `t2d` (bool) when the vocab is reduced
Anything vLLM's draft model has no parameter for (speculators' training-only `verifier_*`
copies) is left out. Our `harness.json` (the verifier it was trained for) is kept beside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from harness.draft.formats import inspect_draft
from harness.errors import BadInput
from harness.provenance import atomic_dir

# Top-level speculators fields that keep their name and meaning in the SpecForge config.
_VARIANT_FIELDS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output", "target_hidden_size")
_DROPPED_PREFIXES = ("verifier_",)


def specforge_config(spec_cfg: dict[str, Any]) -> dict[str, Any]:
    """The SpecForge config.json for a speculators eagle3 config."""
    layer = dict(spec_cfg.get("transformer_layer_config") or {})
    cfg: dict[str, Any] = {k: v for k, v in layer.items() if k not in ("architectures", "auto_map")}
    cfg.update(
        architectures=["LlamaForCausalLMEagle3"],
        model_type=layer.get("model_type", "llama"),
        draft_vocab_size=spec_cfg.get("draft_vocab_size") or layer.get("vocab_size"),
    )
    for k in _VARIANT_FIELDS:
        if spec_cfg.get(k) is not None:
            cfg[k] = spec_cfg[k]
    # speculators' own default for an eagle3 config (vLLM applies it to speculators configs only)
    cfg.setdefault("norm_before_residual", True)
    eagle: dict[str, Any] = {"use_aux_hidden_state": True}
    if spec_cfg.get("eagle_aux_hidden_state_layer_ids"):
        eagle["eagle_aux_hidden_state_layer_ids"] = list(spec_cfg["eagle_aux_hidden_state_layer_ids"])
    cfg["eagle_config"] = eagle
    if spec_cfg.get("dtype") and "torch_dtype" not in cfg:
        cfg["torch_dtype"] = spec_cfg["dtype"]
    return cfg


def specforge_key(key: str) -> str | None:
    """speculators weight name -> SpecForge name (None: not a served weight)."""
    if key.startswith(_DROPPED_PREFIXES):
        return None
    if key.startswith("layers.0."):
        return "midlayer." + key[len("layers.0.") :]
    return key


def to_specforge(speculators_dir: str | Path, out_dir: str | Path) -> Path:
    """Write `speculators_dir`'s eagle3 draft to `out_dir` in the SpecForge layout (same weights)."""
    from safetensors.torch import load_file, save_file

    src, out = Path(speculators_dir), Path(out_dir)
    info = inspect_draft(src)
    if info.format != "speculators" or info.parallel_drafting:
        raise BadInput(
            f"{src}: is a {info.format} draft ({info.architecture}); to_specforge converts a speculators eagle3 draft"
        )
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{out}: exists and is not empty; choose a new folder")
    spec_cfg = json.loads((src / "config.json").read_text())
    tensors: dict[str, Any] = {}
    for shard in sorted(src.glob("*.safetensors")):
        for key, t in load_file(str(shard)).items():
            new = specforge_key(key)
            if new is not None:
                tensors[new] = t
    with atomic_dir(out) as tmp:
        (tmp / "config.json").write_text(json.dumps(specforge_config(spec_cfg), indent=2))
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if (src / "harness.json").is_file():
            meta = json.loads((src / "harness.json").read_text())
            meta["converted_from"] = {
                "path": str(src.resolve()),
                "format": "speculators",
                "content_hash": info.content_hash,
            }
            (tmp / "harness.json").write_text(json.dumps(meta, indent=2))
        for extra in ("generation_config.json",):
            if (src / extra).is_file():
                shutil.copy2(src / extra, tmp / extra)
    return out
