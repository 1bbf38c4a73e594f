"""A verifier's per-token cost from its config (harness/plan/model_cost.py): total and active
parameters against published totals and against the weights a stand-in actually holds, FLOPs and
decode bytes per token."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.plan.model_cost import active_params, attention_flops, decode_bytes, flops_per_token, params
from harness.verifier.safetensors_index import read_header

SMOLLM2 = Path(__file__).parent / "fixtures" / "smollm2-135m-instruct" / "config.json"


def _safetensors_params(folder: Path, prefix: str = "") -> int:
    """Every weight the checkpoint stores under `prefix` (the text model's), counted from the headers."""
    infos = [i for f in sorted(folder.glob("*.safetensors")) for k, i in read_header(f).items() if k.startswith(prefix)]
    return sum(math.prod(i.shape) for i in infos)


def test_smollm2_counts_its_134_5_m_parameters_once_with_tied_embeddings():
    cfg = json.loads(SMOLLM2.read_text())
    p = params(cfg)
    assert p is not None and p.total == 134_515_008  # 134.5 M (the model card)
    # a token runs every layer and the LM head over 49,152 tokens; the tied embedding is a lookup
    per_layer = 2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536  # q, o; k, v over 3 KV heads; the MLP
    assert p.active == 30 * per_layer + 49_152 * 576
    assert flops_per_token(cfg) == 2 * p.active
    # 2 FLOPs x 9 heads x (64 + 64) per earlier position, over 30 layers
    assert attention_flops(cfg, 100) == 2 * 30 * 9 * 128 * 100
    assert decode_bytes(cfg) == 2 * p.active and decode_bytes(cfg, "float32") == 4 * p.active
    untied = params({**cfg, "tie_word_embeddings": False})
    assert untied is not None and untied.total == p.total + 49_152 * 576 and untied.active == p.active


@pytest.mark.parametrize(("standin", "prefix"), [("kimi_standin", "language_model."), ("llama_standin", "")])
def test_stand_in_counts_equal_the_weights_it_holds(standin, prefix, request):
    """MLA + MoE (every expert in the total, the picked ones active) and GQA, against the safetensors
    of the stand-ins the suite builds (session fixtures)."""
    folder = request.getfixturevalue(standin)
    cfg = json.loads((folder / "config.json").read_text())
    p = params(cfg.get("text_config", cfg))
    assert p is not None and p.total == _safetensors_params(folder, prefix)
    assert p.active < p.total


def test_kimi_k25_has_about_1_t_parameters_32_b_active():
    from harness.paths import REPO_ROOT
    from harness.plan.dry_run import layout_for_plan
    from harness.recipe import load_recipe

    layout, _ = layout_for_plan(load_recipe(REPO_ROOT / "train" / "kimi-k2.5.toml"))
    p = params(layout.text_config)
    # the model card: 1.04 T total (the text model ~1.03 T, the vision tower the rest), 32 B activated
    assert p is not None and abs(p.total - 1.04e12) / 1.04e12 < 0.03 and abs(p.active - 32e9) / 32e9 < 0.03
    assert active_params(layout.text_config) == p.active


def test_a_config_without_sizes_has_no_cost():
    assert params({"hidden_size": 8}) is None and flops_per_token({"hidden_size": 8}) is None
    tiny = {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16}
    tiny |= {"num_key_value_heads": 1, "vocab_size": 10}
    # per layer: q, o 2 x 8 x 8 + k, v 2 x 8 x 4 + MLP 3 x 8 x 16; + head 10 x 8
    assert active_params(tiny) == 2 * (128 + 64 + 384) + 80
