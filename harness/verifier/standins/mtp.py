"""A DeepSeek-V3 stand-in variant that carries its own MTP layer (`num_nextn_predict_layers` = 1),
laid out as DeepSeek-V3 ships it: layer L (after the L decoder layers) holds `enorm`, `hnorm`,
`eh_proj` [H, 2H], `shared_head.{norm,head}` and a full decoder block.

The MTP block is not trained: it copies the last decoder layer, the final norm and lm_head, and
its `eh_proj` passes the verifier's hidden state through (the embedding half is zero). That is
enough to test recognition, fit checks and how far vLLM gets in serving method "mtp".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.errors import BadInput
from harness.provenance import atomic_dir
from harness.verifier.layout import resolve_layout


def with_mtp_layer(src: str | Path, out: str | Path) -> Path:
    """Copy the DeepSeek-V3 checkpoint `src` into `out` with one MTP layer added."""
    import torch
    from safetensors.torch import load_file, save_file

    src, out = Path(src), Path(out)
    layout = resolve_layout(src)
    if layout.text_model_type != "deepseek_v3" or layout.multimodal:
        raise BadInput(
            f"{src}: MTP variants are built from a text-only DeepSeek-V3 checkpoint (got {layout.text_model_type})"
        )
    n, h = layout.num_layers, layout.hidden_size
    with atomic_dir(out) as tmp:
        shutil.copytree(
            src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json", "standin.json")
        )
        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(src.glob("*.safetensors")):
            tensors.update(load_file(str(shard)))
        last, mtp = f"model.layers.{n - 1}.", f"model.layers.{n}."
        for key in [k for k in tensors if k.startswith(last)]:
            tensors[mtp + key[len(last) :]] = tensors[key].clone()
        dtype = tensors[layout.final_norm.key].dtype
        eh = torch.zeros(h, 2 * h, dtype=dtype)
        eh[:, h:] = torch.eye(h, dtype=dtype)  # [embedding | hidden] -> hidden
        tensors.update(
            {
                mtp + "enorm.weight": torch.ones(h, dtype=dtype),
                mtp + "hnorm.weight": torch.ones(h, dtype=dtype),
                mtp + "eh_proj.weight": eh,
                mtp + "shared_head.norm.weight": tensors[layout.final_norm.key].clone(),
                mtp + "shared_head.head.weight": tensors[layout.lm_head.key].clone(),
            }
        )
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        cfg = json.loads((src / "config.json").read_text())
        cfg["num_nextn_predict_layers"] = 1
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    return out
