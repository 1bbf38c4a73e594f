"""The training-health verdict of a real training run (harness/train/health.py): the CI's normally
trained draft is not flagged (the session's training, no run of its own), and train.on_unhealthy
warns or stops. A draft trained on a tenth of the data is flagged end to end in
tests/e2e/test_unhealthy_training.py."""

from __future__ import annotations

import pytest

from harness.analysis.training_health import Knobs, TrainingFigures, assess
from harness.errors import BadInput
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE

UNHEALTHY = assess(
    TrainingFigures(5000, 1_700_000, 30, 3.0, 1.0, 0.5, 1.1, 0.4, 1.6, {"random": 1.0}),
    Knobs(num_prompts=38, epochs=2, lr=3e-3),
)


def test_warn_logs_the_verdict_and_carries_on(tmp_path):
    recipe = load_recipe(PLAIN_RECIPE, [])
    assert recipe.train.on_unhealthy == "warn"
    logged: list[str] = []
    note = act(recipe, tmp_path, logged.append)
    assert note == UNHEALTHY.line() and note.startswith("training UNHEALTHY: too few samples")
    assert len(logged) == 1 and "benching it anyway" in logged[0]


def test_stop_refuses_in_one_line_naming_the_kept_draft(tmp_path):
    recipe = load_recipe(PLAIN_RECIPE, ["train.on_unhealthy='stop'"])
    with pytest.raises(BadInput) as e:
        act(recipe, tmp_path, lambda _: pytest.fail("stop does not warn"))
    assert "\n" not in e.value.message and "too few samples" in e.value.message
    assert str(tmp_path) in e.value.message and "train.on_unhealthy=warn" in e.value.message


def test_what_to_do_judges_nothing_without_a_verdict_or_with_a_healthy_one(tmp_path):
    from harness.train.health import act_on_health

    recipe = load_recipe(PLAIN_RECIPE, ["train.on_unhealthy='stop'"])
    assert act_on_health(recipe, None, tmp_path, print) is None
    healthy = assess(TrainingFigures(None, None, None, None, None, None, None, None, 3.0), Knobs(None, 2, 3e-3))
    assert act_on_health(recipe, healthy, tmp_path, print) is None


def test_on_unhealthy_leaves_the_run_folders_name_alone():
    """It only judges: a job stopped by it resumes, training kept, when rerun with 'warn'."""
    warn, stop = load_recipe(PLAIN_RECIPE, []), load_recipe(PLAIN_RECIPE, ["train.on_unhealthy='stop'"])
    assert warn.fingerprint() == stop.fingerprint() and warn.fingerprint("train") == stop.fingerprint("train")


def act(recipe, draft_dir, log):
    from harness.train.health import act_on_health

    return act_on_health(recipe, UNHEALTHY, draft_dir, log)


@pytest.mark.slow
def test_the_ci_trained_draft_is_not_flagged(kimi_trained_run):
    """The session's CI-sized training (tests/conftest.py): healthy as it stands, and against ngram too,
    whose expected tokens per step over the training responses its predicted AL beats."""
    from safetensors.torch import load_file

    from harness.train.health import trainable_params, training_health
    from harness.train.responses import _read_samples
    from tests.conftest import CI_TRAIN

    run = kimi_trained_run
    health = run.report.health
    assert health is not None and health.healthy, health.line() if health else None
    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'", *CI_TRAIN, "bench.reference_drafts=['ngram']"])
    samples = _read_samples(sorted((run.run_dir / "responses").glob("part-*.jsonl")))
    with_ngram = training_health(recipe, run.run_dir, run.report, samples, run.draft_dir)
    assert with_ngram.healthy, with_ngram.line()
    f = with_ngram.figures
    assert f.predicted_al is not None and 1.0 < f.references["ngram"] < f.predicted_al
    # trainable: every saved tensor but the frozen embeddings and the vocabulary maps
    tensors = load_file(str(run.draft_dir / "model.safetensors"))
    frozen = {"embed_tokens.weight", "d2t", "t2d"}
    assert trainable_params(run.draft_dir) == sum(t.numel() for k, t in tensors.items() if k not in frozen)
