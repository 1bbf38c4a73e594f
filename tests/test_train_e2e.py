"""End to end on CPU, real engines: train a draft for each stand-in, serve it with vLLM and
check it beats an untrained draft of the same shape by a wide margin, and that the served
acceptance matches the training prediction (train and serve see the same verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.bench.run import DraftUnderTest, resolve_drafts, run_bench
from harness.recipe import REPO_ROOT, load_recipe
from harness.results.table import load_run
from harness.train.pipeline import resolve_verifier, run_train
from harness.ui import Reporter

pytestmark = pytest.mark.slow

# CI-sized training: small enough for a few minutes on 2 cores, large enough to show learning.
CI_TRAIN = ["train.num_prompts=384", "train.max_new_tokens=96", "train.epochs=3", "train.total_seq_len=1024",
            "train.lr=3e-3"]
CI_BENCH = ["bench.suites=['code','math']", "bench.num_prompts=4", "bench.max_tokens=64", "bench.k=[3]",
            "bench.concurrency=[1]", "bench.temperature=[0.0]", "bench.warmup_requests=1",
            "bench.reference_drafts=['random']", "bench.engine='offline'"]
# Margins set from measured figures (see the closing notes of the Train issue): the trained
# draft served AL >= 2.5 where the untrained one sits at ~1.0.
MIN_TRAINED_AL = 2.5
MIN_MARGIN = 1.2


def _train_and_bench(tmp: Path, arch: str, extra: list[str]):
    recipe = load_recipe(REPO_ROOT / "train" / "tiny-kimi.toml",
                         [f"verifier.standin='{arch}'", *CI_TRAIN, *CI_BENCH, *extra])
    trained = run_train(recipe, tmp / "train", Reporter())
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, trained.draft_dir)
    run_dir = run_bench(recipe, drafts, tmp / "bench", Reporter())
    _, df, missing = load_run(run_dir)
    assert not missing
    spec = df[df["mode"] == "speculative"]
    return trained, spec


@pytest.fixture(scope="module")
def kimi_trained(tmp_path_factory, kimi_standin):
    return _train_and_bench(tmp_path_factory.mktemp("kimi"), "kimi-k2.5", [])


def _pooled_al(rows) -> float:
    return 1 + rows["num_accepted_tokens"].sum() / rows["num_drafts"].sum()


def test_kimi_trained_draft_beats_untrained_by_wide_margin(kimi_trained):
    trained, spec = kimi_trained
    al_trained = _pooled_al(spec[spec["draft"] == "draft"])
    al_random = _pooled_al(spec[spec["draft"] == "random"])
    assert al_random < 1.3, al_random
    assert al_trained >= MIN_TRAINED_AL, (al_trained, trained.report)
    assert al_trained - al_random >= MIN_MARGIN


def test_kimi_served_al_matches_training_prediction(kimi_trained):
    trained, spec = kimi_trained
    predicted = trained.report["predicted_acceptance_length"]
    served = _pooled_al(spec[spec["draft"] == "draft"])
    assert abs(served - predicted) / predicted <= 0.10, (served, predicted)
    assert trained.report["agreement"] >= 0.97


def test_kimi_draft_checkpoint_is_complete(kimi_trained):
    trained, _ = kimi_trained
    draft = trained.draft_dir
    cfg = json.loads((draft / "config.json").read_text())
    meta = json.loads((draft / "harness.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3"
    assert cfg["eagle_aux_hidden_state_layer_ids"] == meta["aux_layer_ids"]
    hidden = json.loads((trained.run_dir / "hidden" / "done.json").read_text())
    assert hidden["aux_layer_ids"] == meta["aux_layer_ids"]  # extraction, training and config agree
    assert meta["verifier"]["content_hash"]["sha256"]
    rep = trained.report
    assert len(rep["held_out_full_acc"]) == 3 and rep["train_loss_last"] < rep["train_loss_first"]
    assert (trained.run_dir / "train_report.png").is_file()


def test_llama_trained_draft_beats_untrained(tmp_path_factory, llama_standin):
    trained, spec = _train_and_bench(tmp_path_factory.mktemp("llama"), "llama", [])
    al_trained = _pooled_al(spec[spec["draft"] == "draft"])
    al_random = _pooled_al(spec[spec["draft"] == "random"])
    assert al_random < 1.3
    assert al_trained >= MIN_TRAINED_AL, (al_trained, trained.report)
    assert al_trained - al_random >= MIN_MARGIN


def test_draft_for_another_verifier_is_refused(kimi_trained, llama_standin):
    from harness.bench.run import check_draft_for_verifier
    from harness.errors import BadInput
    from harness.verifier.layout import resolve_layout

    trained, _ = kimi_trained
    with pytest.raises(BadInput, match="trained for another verifier|was trained for verifier"):
        check_draft_for_verifier(trained.draft_dir, resolve_layout(llama_standin))


_ = DraftUnderTest
