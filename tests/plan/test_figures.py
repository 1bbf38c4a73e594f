"""The figures the cost model prices with (harness/plan/figures.py): a recipe's override says so, every
default names its source, the GPU defaults cite theirs, active parameters from the config."""

from __future__ import annotations

from harness.paths import REPO_ROOT
from harness.plan.figures import (
    ASSUMPTION,
    CITED,
    CPU_DEFAULTS,
    DERIVED,
    FIGURES,
    MEASURED,
    RECIPE,
    active_params,
    by_key,
    default_figures,
    with_recipe,
)
from harness.recipe import load_recipe

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def test_recipe_figures_override_the_defaults_and_say_so():
    r = load_recipe(None, ["cost.generate_tok_s=123", "cost.engine_start_s=5"])
    figs = by_key(with_recipe(r.cost, default_figures("cpu")))
    assert (figs["generate_tok_s"].value, figs["generate_tok_s"].basis) == (123, RECIPE)
    assert (figs["engine_start_s"].value, figs["engine_start_s"].basis) == (5, RECIPE)
    assert figs["train_tok_s"].basis == MEASURED  # unset: the device's default, as measured
    assert figs["train_tok_s"].value == CPU_DEFAULTS["train_tok_s"][0]
    # figures estimate: they change no run folder's identity, and no trained draft's
    assert r.fingerprint() == load_recipe(None).fingerprint()


def test_every_default_figure_names_its_source_and_the_gpu_defaults_cite_theirs():
    for figs in (default_figures("cpu"), default_figures("cuda", 8, 32_000_000_000, 900_000_000, 3)):
        assert [f.key for f in figs][: len(FIGURES)] == list(FIGURES)
        for f in figs:
            assert f.source.strip() and f.unit.strip() and f.basis in (RECIPE, CITED, DERIVED, ASSUMPTION, MEASURED)
    gpu = by_key(default_figures("cuda", 8, 32_000_000_000, 900_000_000, 3))
    gen = gpu["generate_tok_s"]
    assert gen.value == round(1408 * 4.8 / 8.0) == 845 and gen.basis == DERIVED
    assert "lambda.ai/inference-models/moonshotai/kimi-k2.6" in gen.source and "semianalysis" in gen.source
    assert gpu["generate_concurrency"].value == 32 and gpu["generate_concurrency"].basis == CITED
    assert gpu["engine_start_s"].basis == ASSUMPTION and "cost.engine_start_s" in gpu["engine_start_s"].source
    assert (
        gpu["mfu"].basis == ASSUMPTION
        and gpu["gpu_peak_flops"].basis == CITED
        and "H200" in gpu["gpu_peak_flops"].source
    )
    # 8 GPUs x 989e12 x 0.30 / (2 x 32e9); 989e12 x 0.30 / (6 x 900e6 x 3)
    assert gpu["extract_tok_s"].value == round(8 * 989e12 * 0.30 / 64e9)
    assert gpu["train_tok_s"].value == round(989e12 * 0.30 / (6 * 900e6 * 3))


def test_active_params_from_the_config():
    from harness.plan.dry_run import layout_for_plan

    layout, _ = layout_for_plan(load_recipe(KIMI))
    kimi = active_params(layout.text_config)
    assert kimi is not None and abs(kimi - 32e9) / 32e9 < 0.03  # the model card: 32 B activated
    dense = {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16}
    dense |= {"num_key_value_heads": 1, "vocab_size": 10}
    # per layer: q, o 2 x 8 x 8 + k, v 2 x 8 x 4 + MLP 3 x 8 x 16; + head 10 x 8
    assert active_params(dense) == 2 * (128 + 64 + 384) + 80
    assert active_params({"hidden_size": 8}) is None
