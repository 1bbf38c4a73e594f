"""draft.method (issue 28): P-EAGLE and DFlash beside EAGLE-3 through the same recipe, loader, fit and
dry run; a per-method recipe states only how it differs from the recipe it extends. The trained
P-EAGLE and DFlash drafts served by vLLM are tests/e2e/test_train_e2e.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.draft.config import mask_token_id
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.plan.training_plan import positions_per_token
from harness.recipe import load_recipe, merge_tables
from harness.train.records import held_out_full_acc, position_acc_key, predicted_al

KIMI, KIMI_PEAGLE, KIMI_DFLASH = (
    REPO_ROOT / "train" / n for n in ("kimi-k2.5.toml", "kimi-k2.5-peagle.toml", "kimi-k2.5-dflash.toml")
)


def _dry_run(recipe) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "harness", "train-and-bench", str(recipe), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_method_specific_fields_are_refused_for_another_method_with_one_line_each():
    for key in ("draft.mask_token_id=5", "train.max_anchors=64"):
        with pytest.raises(BadInput, match=f"{key.split('=')[0]} is a P-EAGLE and DFlash setting: set draft.method"):
            load_recipe(None, [key])
    for method in ("peagle", "dflash"):
        r = load_recipe(None, [f"draft.method='{method}'", "draft.mask_token_id=5", "train.max_anchors=64"])
        assert (r.draft.method, r.draft.mask_token_id, r.train.max_anchors) == (method, 5, 64)
    with pytest.raises(BadInput, match="draft.method"):
        load_recipe(None, ["draft.method='dspark'"])
    # the loss follows speculators' CLI default for the method unless the recipe names one
    assert load_recipe(None, ["draft.method='dflash'"]).train_loss == "ce"
    assert load_recipe(None).train_loss == "kl_div"
    assert load_recipe(None, ["draft.method='dflash'", "train.loss='kl_div'"]).train_loss == "kl_div"
    # stating the default is the same recipe: run folders made when it was written out still resume
    assert load_recipe(None).fingerprint("train") == load_recipe(None, ["train.loss='kl_div'"]).fingerprint("train")


def test_a_recipe_extends_another_and_states_only_its_differences(tmp_path):
    peagle, base = load_recipe(KIMI_PEAGLE), load_recipe(KIMI)
    assert (peagle.name, peagle.draft.method, peagle.train.ttt_steps) == ("kimi-k2.5-peagle", "peagle", 5)
    # every setting it does not state is the extended recipe's, tables merged key by key
    for section in ("engine", "verifier", "bench"):
        assert getattr(peagle, section) == getattr(base, section), section
    assert peagle.train.model_dump(exclude={"ttt_steps", "max_anchors"}) == base.train.model_dump(
        exclude={"ttt_steps", "max_anchors"}
    )
    assert merge_tables({"a": {"x": 1, "y": [1]}, "b": 2}, {"a": {"y": [2]}}) == {"a": {"x": 1, "y": [2]}, "b": 2}
    loop = tmp_path / "a.toml"
    loop.write_text('extends = "a.toml"\nname = "x"\n')
    with pytest.raises(BadInput, match="loops back"):
        load_recipe(loop)
    missing = tmp_path / "b.toml"
    missing.write_text('extends = "nope.toml"\n')
    with pytest.raises(BadInput, match="extends 'nope.toml', which is not a file"):
        load_recipe(missing)


def test_peagle_dry_run_plans_the_trainable_embedding_and_its_cod_positions():
    """The P-EAGLE recipe's dry run against the real Kimi-K2.5 structure: the draft trains its
    163,840 x 7,168 embedding (counted trainable, not frozen), computes 1 + 0.7 + 0.49 + 0.343 + 0.24
    draft positions per token (not 5 TTT passes), and the cost model costs matmuls, not lookups."""
    base, pe = _dry_run(KIMI), _dry_run(KIMI_PEAGLE)
    embed = 163840 * 7168
    assert pe["draft"]["method"] == "peagle" and base["draft"]["method"] == "eagle3"
    assert pe["draft"]["trainable_params"] == base["draft"]["trainable_params"] + embed + 3 * 7168
    assert pe["draft"]["matmul_params"] == base["draft"]["matmul_params"] == base["draft"]["trainable_params"]
    assert pe["draft"]["positions_per_token"] == pytest.approx(1 + 0.7 + 0.49 + 0.343 + 0.2401, abs=1e-3)
    assert base["draft"]["positions_per_token"] == 3
    assert pe["checks"]["ok"] and pe["training"]["command"].startswith("torchrun --nproc_per_node=8")
    served = pe["bench"]["speculative_command_example"]
    assert '"method": "eagle3"' in served and '"parallel_drafting": true' in served
    assert "parallel_drafting" not in base["bench"]["speculative_command_example"]


def test_dflash_dry_run_plans_its_block_and_serves_as_vllms_dflash():
    """The DFlash recipe's dry run against the real Kimi-K2.5 structure: 5 Qwen3 layers, all full
    attention, 512 anchors x 16 block positions per 8,192-token batch (+ the context's K/V: 2 positions
    per token), cross-entropy loss, served as vLLM's dflash method."""
    base, df = _dry_run(KIMI), _dry_run(KIMI_DFLASH)
    d = df["draft"]
    assert d["method"] == "dflash" and d["ttt_steps"] == 15 and d["positions_per_token"] == 2.0
    assert d["layer_config"]["layer_types"] == ["full_attention"] * 5 and d["layer_config"]["num_hidden_layers"] == 5
    assert df["training"]["loss"] == "ce" and base["training"]["loss"] == "kl_div"
    assert df["checks"]["ok"] and df["training"]["command"].startswith("torchrun --nproc_per_node=8")
    assert '"method": "dflash"' in df["bench"]["speculative_command_example"]


def test_peagle_accuracies_map_to_the_harness_prediction():
    """EAGLE-3 logs full_acc_k (steps 0..k all right); P-EAGLE logs each depth alone, and its
    full_acc_k is their running product."""
    val = {"position_0_acc_epoch": 0.8, "position_1_acc_epoch": 0.5, "position_2_acc_epoch": 0.5}
    assert held_out_full_acc(val, "peagle", 3) == pytest.approx([0.8, 0.4, 0.2])
    assert held_out_full_acc({"full_acc_0_epoch": 0.8, "full_acc_1_epoch": 0.6}, "eagle3", 3) == [0.8, 0.6]
    assert (position_acc_key("peagle", 2), position_acc_key("eagle3", 2)) == ("position_2_acc", "full_acc_2")
    assert positions_per_token("eagle3", 3) == 3 and positions_per_token("peagle", 1) == 1
    # DFlash: slot k+1 after the anchor; the prediction is speculators' eal where it logged one
    dval = {"position_1_acc_epoch": 0.8, "position_2_acc_epoch": 0.5}
    assert position_acc_key("dflash", 0) == "position_1_acc"
    assert held_out_full_acc(dval, "dflash", 2) == pytest.approx([0.8, 0.4])
    assert predicted_al(dval, "dflash", 2) == pytest.approx(2.2)
    assert predicted_al({**dval, "eal_epoch": 2.5}, "dflash", 2) == 2.5
    assert predicted_al({}, "eagle3", 3) is None
    assert positions_per_token("dflash", 3, total_seq_len=1024) == 2.0
    assert positions_per_token("dflash", 3, total_seq_len=1024, max_anchors=64) == 1.25


def test_mask_token_follows_speculators_order_without_loading_a_processor():
    layout = SimpleNamespace(vocab_size=100)

    class Tok:
        def __init__(self, n, mask=None, pad=None, eos=None, bos=None):
            self.n, self.mask_token_id, self.pad_token_id, self.eos_token_id, self.bos_token_id = n, mask, pad, eos, bos

        def __len__(self):
            return self.n

    peagle = load_recipe(None, ["draft.method='peagle'"])
    assert mask_token_id(load_recipe(None), layout, Tok(90)) is None  # EAGLE-3 has none
    assert mask_token_id(peagle, layout, Tok(90, mask=7)) == 7
    assert mask_token_id(peagle, layout, Tok(90, pad=0)) == 90  # first unused embedding row
    assert mask_token_id(peagle, layout, Tok(100, pad=0, eos=2, bos=1)) == 1  # a trained row before pad's
    assert mask_token_id(peagle, layout, Tok(100, pad=0, eos=2)) == 0
    assert mask_token_id(peagle, layout, Tok(100, eos=2)) == 2
    assert mask_token_id(load_recipe(None, ["draft.method='peagle'", "draft.mask_token_id=3"]), layout, Tok(100)) == 3
    with pytest.raises(BadInput, match="outside the verifier's vocabulary"):
        mask_token_id(load_recipe(None, ["draft.method='peagle'", "draft.mask_token_id=100"]), layout, Tok(100))
    with pytest.raises(BadInput, match="set draft.mask_token_id"):
        mask_token_id(peagle, layout, Tok(100))
    assert mask_token_id(load_recipe(None, ["draft.method='dflash'"]), layout, Tok(100, pad=0, bos=1)) == 1


def test_the_loader_builds_either_method_on_the_kimi_layout(kimi_layout):
    """The patched loader's draft class for each method is speculators' own class underneath,
    registered for its Trainer, and reads the verifier-owned weights from the nested, prefixed
    layout; P-EAGLE's embedding is trainable and its mask token and depths are in its config."""
    import torch
    from speculators.model import SpeculatorModel
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.models.peagle import PEagleDraftModel
    from transformers import LlamaConfig

    from harness.verifier.loader import build_draft, draft_class, read_verifier_tensors

    for method, base in (("eagle3", Eagle3DraftModel), ("peagle", PEagleDraftModel)):
        assert issubclass(draft_class(method), base) and SpeculatorModel.registry[f"harness-{method}"] is draft_class(
            method
        )
    h, v = kimi_layout.hidden_size, kimi_layout.vocab_size
    t2d = torch.zeros(v, dtype=torch.bool)
    t2d[:64] = True
    cfg = LlamaConfig(vocab_size=v, hidden_size=h, intermediate_size=2 * h, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=4, head_dim=h // 4)  # fmt: skip
    model = build_draft(
        kimi_layout, draft_layer_config=cfg, aux_layer_ids=[2, 4, 5], draft_vocab_size=64, t2d=t2d,
        d2t=torch.arange(64), ttt_steps=4, method="peagle", mask_token_id=0,
    )  # fmt: skip
    assert isinstance(model, PEagleDraftModel)
    assert model.config.mask_token_id == 0 and model.config.speculators_config.algorithm == "peagle"
    assert model.config.speculators_config.proposal_methods[0].speculative_tokens == 4
    assert model.embed_tokens.weight.requires_grad and not model.verifier_lm_head.weight.requires_grad
    w = read_verifier_tensors(kimi_layout)
    assert torch.equal(model.embed_tokens.weight.detach(), w["embed_tokens"].to(model.embed_tokens.weight.dtype))
    with pytest.raises(BadInput, match="the harness trains eagle3, peagle, dflash"):
        draft_class("dspark")


def test_the_loader_builds_a_dflash_draft_on_the_kimi_layout(kimi_layout):
    """DFlash through the same patched loader: speculators' DFlashDraftModel with Qwen3 layers, a block
    of ttt_steps + 1, the verifier's embedding (frozen) and head rows read from the nested, prefixed
    layout, and the draft config's aux ids and mask token as vLLM's dflash method reads them."""
    import torch
    from speculators.models.dflash import DFlashDraftModel

    from harness.draft.config import draft_layer_config
    from harness.verifier.loader import build_draft, layer_config, read_verifier_tensors

    recipe = load_recipe(None, ["draft.method='dflash'", "draft.num_layers=2"])
    values = draft_layer_config(recipe, kimi_layout, 512)
    v = kimi_layout.vocab_size
    t2d = torch.zeros(v, dtype=torch.bool)
    t2d[:64] = True
    model = build_draft(
        kimi_layout, draft_layer_config=layer_config("dflash", values), aux_layer_ids=[2, 4, 5], draft_vocab_size=64,
        t2d=t2d, d2t=torch.arange(64), ttt_steps=3, method="dflash", mask_token_id=1,
    )  # fmt: skip
    assert isinstance(model, DFlashDraftModel) and model.config.transformer_layer_config.model_type == "qwen3"
    assert (model.config.block_size, model.config.mask_token_id, model.target_layer_ids) == (4, 1, [2, 4, 5])
    assert len(model.layers) == 2 and model.config.speculators_config.proposal_methods[0].speculative_tokens == 3
    assert model.config.sliding_window_non_causal  # vLLM then serves its full-attention layers non-causal
    w = read_verifier_tensors(kimi_layout)
    assert torch.equal(model.embed_tokens.weight.detach(), w["embed_tokens"].to(model.embed_tokens.weight.dtype))
    assert torch.equal(model.lm_head.weight.detach(), w["lm_head"][:64].to(model.lm_head.weight.dtype))
    assert not model.embed_tokens.weight.requires_grad and not model.lm_head.weight.requires_grad
