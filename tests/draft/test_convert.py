"""A speculators draft converts to SpecForge's layout with the same weights (harness/draft/convert.py),
a hand-written one and one the real library saved."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from harness.draft.convert import to_specforge
from harness.draft.fit_check import draft_problems
from harness.draft.formats import inspect_draft
from tests.draft_fixtures import (
    DRAFT_VOCAB,
    built_draft,
    speculators_draft,
    vocab_maps,
)
from tests.synthetic import VOCAB


def test_speculators_draft_converts_to_specforge_with_the_same_weights(tmp_path, kimi):
    src = speculators_draft(tmp_path / "spec")
    (src / "harness.json").write_text(json.dumps({"held_out_full_acc": [0.5]}))
    out = to_specforge(src, tmp_path / "sf")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == DRAFT_VOCAB
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert cfg["norm_before_residual"] is True and cfg["vocab_size"] == VOCAB
    a, b = load_file(str(src / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert {k.replace("layers.0.", "midlayer.") for k in a} == set(b)
    assert all(torch.equal(t, b[k.replace("layers.0.", "midlayer.")]) for k, t in a.items())
    assert torch.equal(b["d2t"], vocab_maps()["d2t"])
    info = inspect_draft(out)
    assert (info.format, info.aux_layer_ids, info.has_d2t) == ("specforge", (1, 2, 3), True)
    assert (
        info.harness_meta["held_out_full_acc"] == [0.5]
        and info.harness_meta["converted_from"]["format"] == "speculators"
    )
    assert draft_problems(info, kimi) == []


def test_a_draft_saved_by_speculators_converts(tmp_path, kimi):
    """The real library's checkpoint (not a hand-written one): reduced vocab, d2t/t2d kept."""
    model = built_draft(kimi)
    model.save_pretrained(str(tmp_path / "spec"))
    info = inspect_draft(to_specforge(tmp_path / "spec", tmp_path / "sf"))
    assert (info.format, info.draft_vocab_size, info.t2d_selected, info.d2t_target_range) == (
        "specforge",
        DRAFT_VOCAB,
        DRAFT_VOCAB,
        (0, VOCAB - VOCAB // DRAFT_VOCAB),
    )
    assert not any(k.startswith("verifier_") for k in info.weights)
    assert draft_problems(info, kimi) == []
