"""The patched loader hands a speculators EAGLE-3 draft exactly its verifier's tensors, and
fails loudly when the speculators internals it relies on change."""

from __future__ import annotations

import inspect

import pytest
import torch
from safetensors import safe_open
from transformers import LlamaConfig

from harness.verifier.layout import resolve_layout
from harness.verifier.loader import build_draft, draft_class, read_verifier_tensors
from tests.synthetic import HIDDEN, VOCAB, assert_source_unchanged, kimi_like


def _draft_cfg(hidden: int, vocab: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=hidden // 2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )


def _tensor(folder, key):
    import json

    idx = folder / "model.safetensors.index.json"
    shard = json.loads(idx.read_text())["weight_map"][key] if idx.exists() else "model.safetensors"
    with safe_open(str(folder / shard), "pt") as f:
        return f.get_tensor(key)


def _vocab_map(vocab: int, draft_vocab: int):
    t2d = torch.zeros(vocab, dtype=torch.bool)
    keep = torch.arange(0, vocab, vocab // draft_vocab)[:draft_vocab]
    t2d[keep] = True
    return t2d, keep - torch.arange(draft_vocab)


def test_draft_gets_language_model_tensors_despite_a_shorter_decoy(tmp_path):
    # A same-shaped embed/lm_head/norm under a *shorter* prefix outside the text model (an
    # MTP-like block): speculators' shortest-suffix rule would take these.
    decoy = {
        "mtp.embed_tokens.weight": (VOCAB, HIDDEN),
        "mtp.lm_head.weight": (VOCAB, HIDDEN),
        "mtp.norm.weight": (HIDDEN,),
    }
    folder = kimi_like(tmp_path / "k", extra=decoy)
    layout = resolve_layout(folder)
    t2d, d2t = _vocab_map(VOCAB, 16)
    draft = build_draft(
        layout,
        draft_layer_config=_draft_cfg(HIDDEN, VOCAB),
        aux_layer_ids=[1, 2, 3],
        draft_vocab_size=16,
        t2d=t2d,
        d2t=d2t,
    )
    emb = _tensor(folder, "language_model.model.embed_tokens.weight")
    head = _tensor(folder, "language_model.lm_head.weight")
    norm = _tensor(folder, "language_model.model.norm.weight")
    assert torch.equal(draft.embed_tokens.weight, emb.float())
    assert torch.equal(draft.lm_head.weight, head[t2d].float())
    assert torch.equal(draft.verifier_lm_head.weight, head[t2d].float())
    assert torch.equal(draft.verifier_norm.weight, norm.float())
    assert not torch.equal(draft.embed_tokens.weight, _tensor(folder, "mtp.embed_tokens.weight").float())


def test_speculators_own_loader_still_picks_the_decoy(tmp_path):
    """Why the override exists. If speculators fixes its suffix matching, this fails: then
    re-check whether the harness still needs LayoutEagle3DraftModel.load_verifier_weights."""
    from speculators.utils.loading import load_model_layers

    decoy = {
        "mtp.embed_tokens.weight": (VOCAB, HIDDEN),
        "mtp.lm_head.weight": (VOCAB, HIDDEN),
        "mtp.norm.weight": (HIDDEN,),
    }
    folder = kimi_like(tmp_path / "k", extra=decoy)
    got = load_model_layers(["embed_tokens.weight", "lm_head.weight", "model.norm.weight"], str(folder))
    assert torch.equal(got["embed_tokens.weight"], _tensor(folder, "mtp.embed_tokens.weight"))
    assert torch.equal(got["lm_head.weight"], _tensor(folder, "mtp.lm_head.weight"))


def test_structure_only_checkpoint_cannot_feed_a_draft(tmp_path):
    from harness.errors import BadInput
    from harness.verifier.bundled import write_reference

    layout = resolve_layout(write_reference("kimi-k2.5", tmp_path / "k25"))
    with pytest.raises(BadInput, match="structure only"):
        read_verifier_tensors(layout)


# The speculators internals the override mirrors. A change in any of them fails this test
# with what to re-check; update the hash after reviewing harness/verifier/loader.py.
PINNED = {
    "speculators.model:DraftVocabMixin._load_verifier_weights": "7d637252ab80f105",
    "speculators.models.eagle3.core:Eagle3DraftModel.load_verifier_weights": "815f56272da31a07",
    "speculators.models.eagle3.core:Eagle3DraftModel.from_training_args": "46e947280d9a0575",
}


@pytest.mark.parametrize("path", list(PINNED))
def test_speculators_internals_unchanged(path):
    assert_source_unchanged(path, PINNED[path], "the patched loader (harness/verifier/loader.py)")


def test_draft_class_is_registered_and_subclasses_eagle3():
    from speculators.model import SpeculatorModel
    from speculators.models.eagle3 import Eagle3DraftModel

    cls = draft_class()
    assert issubclass(cls, Eagle3DraftModel)
    assert SpeculatorModel.registry["harness-eagle3"] is cls
    # speculators still resolves saved eagle3 configs to its own class
    assert SpeculatorModel.registry["eagle3"] is Eagle3DraftModel
    for attr in ("embed_tokens", "lm_head", "verifier_lm_head", "verifier_norm", "t2d", "d2t", "use_draft_vocab"):
        assert attr in inspect.getsource(Eagle3DraftModel.__init__) + inspect.getsource(
            __import__("speculators.model", fromlist=["DraftVocabMixin"]).DraftVocabMixin._init_vocab
        ), attr


@pytest.mark.slow
def test_draft_on_kimi_standin_is_bit_equal_to_language_model_tensors(kimi_standin):
    layout = resolve_layout(kimi_standin)
    t2d, d2t = _vocab_map(layout.vocab_size, 1024)
    cfg = _draft_cfg(layout.hidden_size, layout.vocab_size)
    draft = build_draft(
        layout, draft_layer_config=cfg, aux_layer_ids=[2, 4, 5], draft_vocab_size=1024, t2d=t2d, d2t=d2t
    )
    emb = _tensor(kimi_standin, "language_model.model.embed_tokens.weight")
    head = _tensor(kimi_standin, "language_model.lm_head.weight")
    norm = _tensor(kimi_standin, "language_model.model.norm.weight")
    assert torch.equal(draft.embed_tokens.weight, emb.float())
    assert torch.equal(draft.lm_head.weight, head[t2d].float())
    assert torch.equal(draft.verifier_norm.weight, norm.float())
    assert draft.config.eagle_aux_hidden_state_layer_ids == [2, 4, 5]
    assert draft.config.speculators_config.verifier.architectures == ["KimiK25ForConditionalGeneration"]
