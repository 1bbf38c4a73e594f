"""The figures the cost model prices with (harness/plan/figures.py): a recipe's override says so, every
default names its source, the GPU defaults cite theirs, active parameters from the config."""

from __future__ import annotations

from harness.paths import REPO_ROOT
from harness.plan.figures import (
    ASSUMPTION,
    CITED,
    DERIVED,
    FIGURES,
    MEASURED,
    RECIPE,
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
    assert figs["train_tok_s"].basis == MEASURED  # unset: the device's default, as measured on the stand-in
    assert figs["train_tok_s"].value == round(200_504 / 79.0, 1)  # the demo's training: tokens / seconds
    # a recipe's generation rate is taken at every concurrency: the CPU's per-step cost goes with the default
    assert "decode_step_s" not in figs and "decode_step_s" in by_key(default_figures("cpu"))
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


def test_cpu_figures_scale_with_the_verifier_and_the_draft():
    from harness.plan.cpu_figures import SMOLLM2_JOB, STANDIN_JOB

    standin = by_key(
        default_figures("cpu", draft_params=STANDIN_JOB.draft_params, positions=3, verifier=STANDIN_JOB.params)
    )
    smol = by_key(
        default_figures("cpu", draft_params=SMOLLM2_JOB.draft_params, positions=3, verifier=SMOLLM2_JOB.params)
    )
    assert smol["extract_tok_s"].basis == DERIVED and "SmolLM2" in smol["extract_tok_s"].source
    # 18x the active parameters: the forward 7x slower, decoding 3.5x (a fixed cost per token stays)
    assert 5 < standin["extract_tok_s"].value / smol["extract_tok_s"].value < 9
    assert 2.5 < standin["generate_tok_s"].value / smol["generate_tok_s"].value < 4.5
    assert smol["engine_start_s"].value > standin["engine_start_s"].value
    assert smol["train_tok_s"].value < standin["train_tok_s"].value  # a 6x larger draft
