"""The patched loader: speculators' EAGLE-3 draft, fed exactly its verifier's tensors.

speculators 0.9.0 builds a draft with `Eagle3DraftModel.from_training_args(...)`, which ends in
`load_verifier_weights()`. That one method is where the library's assumptions break for
verifiers like Kimi-K2.5 (docs/facts.md §2):
  - it resolves embed_tokens / lm_head / model.norm by exact name, then the *shortest* suffix
    match, so a same-shaped copy under a shorter prefix outside the text model (an MTP block, a
    vision adapter) wins silently over `language_model.model.embed_tokens.weight`;
  - it checks no shape against the text config;
  - it calls `AutoConfig.from_pretrained` without `trust_remote_code`.
`LayoutEagle3DraftModel` overrides exactly that method: the tensors come from the
VerifierLayout (exact keys, picked by the text model's own prefix or refused, shape-checked),
and everything else — model code, training, checkpoint format — stays the library's.
The override mirrors `DraftVocabMixin._load_verifier_weights`; tests/verifier/test_loader.py pins that
function's source so a speculators upgrade that changes it fails loudly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.verifier.layout import TensorRef, VerifierLayout, resolve_layout

ROLES = ("embed_tokens", "lm_head", "final_norm")


def read_verifier_tensors(layout: VerifierLayout) -> dict[str, Any]:
    """embed_tokens, lm_head and final_norm of the verifier, by their exact keys (lazy reads)."""
    from safetensors import safe_open

    if layout.structure_only:
        raise BadInput(
            f"{layout.path}: has an index but no shards (structure only); download the weights to build a draft"
        )
    refs: dict[str, TensorRef] = {r: getattr(layout, r) for r in ROLES}
    out: dict[str, Any] = {}
    by_shard: dict[str, list[str]] = {}
    for role, ref in refs.items():
        by_shard.setdefault(ref.shard, []).append(role)
    for shard, roles in by_shard.items():
        with safe_open(str(Path(layout.path) / shard), framework="pt", device="cpu") as f:
            for role in roles:
                t = f.get_tensor(refs[role].key)
                if tuple(t.shape) != refs[role].expected_shape:
                    raise BadInput(
                        f"{Path(layout.path) / shard}: {refs[role].key} has shape {list(t.shape)}, "
                        f"expected {list(refs[role].expected_shape)} from the text config"
                    )
                out[role] = t
    return out


def _speculators_class(method: str):
    if method == "peagle":
        from speculators.models.peagle import PEagleDraftModel

        return PEagleDraftModel
    if method == "dflash":
        from speculators.models.dflash import DFlashDraftModel

        return DFlashDraftModel
    from speculators.models.eagle3 import Eagle3DraftModel

    return Eagle3DraftModel


def _draft_class(method: str):
    base = _speculators_class(method)

    class LayoutDraftModel(base):  # type: ignore[valid-type,misc]
        """speculators' draft (EAGLE-3, P-EAGLE or DFlash) whose verifier-owned weights come from a
        VerifierLayout. Embedding and full-vocabulary head are loaded where missing (NaN): DFlash saves
        neither, so a saved DFlash draft takes them from its verifier again, as vLLM does."""

        def load_verifier_weights(self) -> None:
            import torch

            verifier = self.config.speculators_config.verifier
            # speculators types name_or_path Optional; a draft config names its verifier
            layout = getattr(self, "_harness_layout", None) or resolve_layout(verifier.name_or_path)  # type: ignore[arg-type]
            if layout.hidden_size != self.hidden_size:
                raise BadInput(
                    f"verifier {layout.path} has hidden_size {layout.hidden_size} but the draft was "
                    f"built for {self.hidden_size}; rebuild the draft for this verifier"
                )
            w = read_verifier_tensors(layout)
            if self.embed_tokens.weight.isnan().any():
                self.embed_tokens.load_state_dict({"weight": w["embed_tokens"]})
            lm_head = w["lm_head"]
            if self.use_draft_vocab:
                if self.t2d is None or not bool(torch.any(self.t2d)):
                    raise BadInput("draft vocab mapping (t2d) is empty; build the vocab mapping before the draft")
                lm_head = lm_head[self.t2d.to(torch.bool), :]
            if self.lm_head.weight.isnan().any():
                self.lm_head.load_state_dict({"weight": lm_head.detach().clone()})
            self.verifier_lm_head.load_state_dict({"weight": lm_head.detach().clone()})
            self.verifier_norm.load_state_dict({"weight": w["final_norm"]})
            for p in (
                self.embed_tokens.weight,
                self.lm_head.weight,
                self.verifier_lm_head.weight,
                self.verifier_norm.weight,
            ):
                p.requires_grad_(False)
            # P-EAGLE trains its embeddings (the mask token's row is learned): its config says so
            self.embed_tokens.weight.requires_grad_(getattr(self.config, "embed_requires_grad", False))

    LayoutDraftModel.__name__ = LayoutDraftModel.__qualname__ = f"Layout{base.__name__}"
    return LayoutDraftModel


# the methods the harness trains: speculators' registry name -> the harness's registered class
TRAINED_METHODS = ("eagle3", "peagle", "dflash")
_CLASSES: dict[str, Any] = {}


def draft_class(method: str = "eagle3"):
    """The Layout draft class for `method`, registered in speculators' model registry (its Trainer
    refuses unregistered classes). Registration is an explicit call, not an import side effect."""
    if method not in TRAINED_METHODS:
        raise BadInput(f"draft.method {method!r}: the harness trains {', '.join(TRAINED_METHODS)}")
    if method not in _CLASSES:
        from speculators.model import SpeculatorModel

        cls = _CLASSES[method] = _draft_class(method)
        registry = SpeculatorModel.registry or {}
        if f"harness-{method}" not in registry:
            SpeculatorModel.register_decorator(cls, f"harness-{method}")
    return _CLASSES[method]


def layer_config(method: str, values: dict[str, Any]):
    """The draft decoder's transformers config: Qwen3Config for DFlash (its layers are Qwen3's),
    LlamaConfig otherwise (harness/draft/config.py draft_layer_config gives the values)."""
    from transformers import LlamaConfig, Qwen3Config

    return (Qwen3Config if method == "dflash" else LlamaConfig)(**values)


def build_draft(
    layout: VerifierLayout,
    *,
    draft_layer_config: Any,
    aux_layer_ids: list[int],
    draft_vocab_size: int,
    t2d: Any,
    d2t: Any,
    ttt_steps: int = 3,
    attn_impl: str = "sdpa",
    norm_before_residual: bool = True,
    trust_remote_code: bool = False,
    method: str = "eagle3",
    mask_token_id: int | None = None,
):
    """A fresh draft (EAGLE-3, P-EAGLE or DFlash) for `layout`'s verifier, through speculators' own
    factory. P-EAGLE drafts `ttt_steps` positions in parallel (its num_depths); DFlash fills `ttt_steps`
    mask slots after an anchor (its block_size is ttt_steps + 1)."""
    cls = draft_class(method)
    # from_training_args builds the model and calls load_verifier_weights() on it; the layout
    # is handed over on the class for the duration of that call.
    cls._harness_layout = layout
    try:
        return cls.from_training_args(
            draft_layer_config,
            t2d=t2d,
            d2t=d2t,
            verifier_name_or_path=layout.path,
            draft_vocab_size=draft_vocab_size,
            norm_before_residual=norm_before_residual,
            ttt_steps=ttt_steps,
            target_layer_ids=list(aux_layer_ids),
            draft_attn_impl=attn_impl,
            trust_remote_code=trust_remote_code,
            num_depths=ttt_steps,
            block_size=ttt_steps + 1,
            mask_token_id=mask_token_id,
            # speculators trains full-attention DFlash layers non-causally within a block; vLLM reads
            # causal = not sliding_window_non_causal for every layer, so only True serves them as trained
            # (the harness's DFlash layers are all full attention: the flag changes nothing in training)
            sliding_window_non_causal=True,
        )
    finally:
        del cls._harness_layout
