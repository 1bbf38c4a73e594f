"""Warm start (`train.init_from = DIR`): begin training from an existing draft's weights.

What can be warm-started is what speculators' EAGLE-3 draft (a Llama decoder layer) can hold:
  speculators eagle3   loaded as saved
  specforge            converted by speculators' own `Eagle3Converter` (midlayer.* -> layers.0.*),
                       Llama-layer architectures only
and not: MLA EAGLE-3 (speculators has no MLA draft layer), Qwen3 EAGLE-3 (its layer has q/k norms
the Llama layer lacks), P-EAGLE (trained for parallel drafting) and MTP (the verifier's own layers).

The new draft's vocabulary comes from the user's data, so lm_head rows are matched by the verifier
token they stand for (the init draft's d2t); tokens it never had keep their fresh initialisation.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from harness.draft.fit_check import draft_problems
from harness.draft.formats import DraftInfo, inspect_draft
from harness.errors import BadInput
from harness.verifier.layout import VerifierLayout

WARM_STARTABLE = {"speculators": "speculators eagle3", "specforge": "SpecForge/EAGLE-3 with a Llama layer"}
NOT_WARM_STARTABLE = {
    "mla-eagle3": "speculators has no MLA draft layer to train it in",
    "p-eagle": "it is trained for parallel drafting, which harness training does not do",
    "mtp": "MTP layers are the verifier's own, not an EAGLE-3 draft",
}
_VOCAB_KEYS = ("d2t", "t2d")


def check_init_from(path: str | Path, layout: VerifierLayout) -> DraftInfo:
    """The init draft's description, or BadInput saying why it cannot start this training."""
    info = inspect_draft(path)
    why = NOT_WARM_STARTABLE.get(info.format)
    if info.parallel_drafting:
        why = NOT_WARM_STARTABLE["p-eagle"]
    if info.format == "specforge" and "Qwen3" in info.architecture:
        why = "its Qwen3 layer (q/k norms) does not fit speculators' Llama draft layer"
    if why:
        raise BadInput(
            f"train.init_from {path}: a {info.format} draft ({info.architecture}) cannot be warm-started: "
            f"{why}; warm start takes {' or '.join(WARM_STARTABLE.values())}"
        )
    problems = draft_problems(info, layout)
    if problems:
        raise BadInput(f"train.init_from: {problems[0]}")
    return info


def init_state_dict(info: DraftInfo, layout: VerifierLayout) -> dict[str, Any]:
    """The init draft's weights under speculators' names."""
    from safetensors.torch import load_file

    folder = Path(info.path)
    if info.format == "specforge":
        from speculators.convert.eagle.eagle3_converter import Eagle3Converter

        with tempfile.TemporaryDirectory(prefix="harness-init-") as tmp:
            Eagle3Converter().convert(
                folder,
                Path(tmp) / "draft",
                base_model=layout.path,
                validate=False,
                norm_before_residual=info.norm_before_residual,
                eagle_aux_hidden_state_layer_ids=list(info.aux_layer_ids) or None,
            )
            return _load_all(Path(tmp) / "draft", load_file)
    return _load_all(folder, load_file)


def _load_all(folder: Path, load_file) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        out.update(load_file(str(shard)))
    return out


def _remap_lm_head(state: dict[str, Any], model) -> None:
    """Put each init lm_head row at the new draft id of the same verifier token."""
    import torch

    head = state.get("lm_head.weight")
    if head is None:
        return
    new = model.lm_head.weight.detach().clone()
    new_targets = _targets(getattr(model, "d2t", None), new.shape[0])
    old_targets = _targets(state.get("d2t"), head.shape[0])
    where = {int(t): i for i, t in enumerate(old_targets)}
    hits = [(j, where[int(t)]) for j, t in enumerate(new_targets) if int(t) in where]
    if hits:
        dst, src = zip(*hits, strict=True)
        new[list(dst)] = head[list(src)].to(new.dtype)
    state["lm_head.weight"] = new
    state["_lm_head_rows_kept"] = torch.tensor(len(hits))


def _targets(d2t, n: int):
    import torch

    base = torch.arange(n)
    return base if d2t is None else base + d2t.long()


def warm_start(model, path: str | Path, layout: VerifierLayout) -> dict[str, Any]:
    """Load the init draft's weights into a freshly built speculators draft; returns what was loaded."""
    info = check_init_from(path, layout)
    state = init_state_dict(info, layout)
    _remap_lm_head(state, model)
    kept = int(state.pop("_lm_head_rows_kept", 0))
    own = model.state_dict()
    load: dict[str, Any] = {}
    for key, t in state.items():
        if key in _VOCAB_KEYS or key.startswith("verifier_") or key not in own:
            continue  # the vocab maps and the verifier's tensors belong to the new draft
        if tuple(t.shape) != tuple(own[key].shape):
            raise BadInput(
                f"train.init_from {path}: {key} has shape {list(t.shape)}, the draft to train has "
                f"{list(own[key].shape)}; set the recipe's [draft] shape to the init draft's"
            )
        load[key] = t.to(own[key].dtype)
    if "fc.weight" not in load or not any(k.startswith("layers.0.") for k in load):
        raise BadInput(f"train.init_from {path}: no fc / decoder layer weights found to start from")
    model.load_state_dict(load, strict=False)
    return {
        "path": info.path,
        "format": info.format,
        "content_hash": info.content_hash,
        "loaded": sorted(load),
        "lm_head_rows_from_init": kept,
    }
