"""The training-health verdict (harness/analysis/training_health.py) on recorded figures: the CI's
trained draft is healthy; SmolLM2's 244-sample draft of issue 51 is flagged for every reason it
showed, each with its figures and what would help."""

from __future__ import annotations

import dataclasses

from harness.analysis import training_health as th
from harness.analysis.training_health import Knobs, TrainingFigures, TrainingHealth, assess

# The CI's Kimi stand-in draft (tests/conftest.py CI_TRAIN), as its train_report.json and curve read.
CI = TrainingFigures(
    train_tokens_per_epoch=72386,
    trainable_params=1704960,
    num_train_samples=346,
    loss_first=1.324,
    loss_last=0.160,
    train_acc0_last=0.846,
    held_out_loss=0.148,
    held_out_acc0=0.836,
    predicted_al=3.12,
    references={"random": 1.0, "ngram": 1.99},
    ngram_acceptance_length=2.82,
)
CI_KNOBS = Knobs(num_prompts=384, epochs=2, lr=3e-3)
# SmolLM2-135M, issue 51: 256 prompts (244 training samples, ~44k tokens per epoch), a ~9.8 M-parameter
# draft; training loss 13.2, held-out 17.3; predicted AL 1.13; ngram served 1.39-1.65 tokens per step.
SMOLLM2 = TrainingFigures(
    train_tokens_per_epoch=44_000,
    trainable_params=9_800_000,
    num_train_samples=244,
    loss_first=30.0,
    loss_last=13.2,
    train_acc0_last=0.2,
    held_out_loss=17.3,
    held_out_acc0=0.11,
    predicted_al=1.13,
    references={"ngram": 1.39},
)


def test_the_ci_draft_is_healthy():
    h = assess(CI, CI_KNOBS)
    assert h.healthy and h.findings == ()
    assert "healthy" in h.line()


def test_smollm2s_under_trained_draft_is_flagged_with_each_reason_and_remedy():
    h = assess(SMOLLM2, Knobs(num_prompts=256, epochs=3, lr=3e-3))
    assert not h.healthy
    reasons = [f.reason for f in h.findings]
    assert reasons == [th.TOO_FEW, th.OVERFIT, f"{th.CANNOT_BEAT} ngram"]
    too_few = h.findings[0]
    # 44,000 / 9.8 M = 0.0045 tokens per parameter: 256 prompts x 0.02 / 0.0045 = 1,141 reach the floor
    assert "0.0045" in too_few.detail and "train.num_prompts=1141" in too_few.remedy
    assert "1.31" in h.findings[1].detail and "train.epochs=2" in h.findings[1].remedy
    assert "1.13" in h.findings[2].detail and "deploy ngram" in h.findings[2].remedy
    line = h.line()
    assert line.startswith("training UNHEALTHY: too few samples") and "try more prompts" in line


def test_each_threshold_is_where_the_docstring_says():
    at = dataclasses.replace
    floor = th.MIN_TOKENS_PER_PARAM * CI.trainable_params
    assert assess(at(CI, train_tokens_per_epoch=int(floor) + 1), CI_KNOBS).healthy
    assert not assess(at(CI, train_tokens_per_epoch=int(floor) - 1), CI_KNOBS).healthy
    # overfit by loss, and by accuracy
    assert assess(at(CI, held_out_loss=CI.loss_last * 1.2), CI_KNOBS).healthy
    assert [f.reason for f in assess(at(CI, held_out_loss=CI.loss_last * 1.3), CI_KNOBS).findings] == [th.OVERFIT]
    acc = assess(at(CI, held_out_acc0=CI.train_acc0_last * 0.7), CI_KNOBS).findings
    assert [f.reason for f in acc] == [th.OVERFIT] and "accuracy" in acc[0].detail
    # the loss not falling: barely moved (raise lr), or rose (lower it)
    flat = assess(at(CI, loss_first=1.0, loss_last=0.95), CI_KNOBS).findings
    assert [f.reason for f in flat] == [th.NOT_FALLING] and "train.lr=0.009" in flat[0].remedy
    one_epoch = assess(at(CI, held_out_loss=CI.loss_last * 1.3), Knobs(384, 1, 3e-3)).findings[0]
    assert one_epoch.remedy == "more data (train.num_prompts)"  # no fewer epochs than one
    rose = assess(at(CI, loss_first=1.0, loss_last=1.5), CI_KNOBS).findings
    assert "lower the learning rate (train.lr=0.001" in rose[0].remedy
    # a predicted AL at or under a reference arm's tokens per step
    assert [f.reason for f in assess(at(CI, predicted_al=1.99), CI_KNOBS).findings] == [f"{th.CANNOT_BEAT} ngram"]
    assert [f.reason for f in assess(at(CI, predicted_al=1.0, references={"random": 1.0}), CI_KNOBS).findings] == [
        f"{th.CANNOT_BEAT} random"
    ]


def test_missing_figures_are_not_judged():
    blank = TrainingFigures(None, None, None, None, None, None, None, None, None)
    assert assess(blank, CI_KNOBS).healthy


def test_the_verdict_round_trips_through_json():
    h = assess(SMOLLM2, Knobs(num_prompts=256, epochs=3, lr=3e-3))
    d = h.to_dict()
    assert d["healthy"] is False and d["figures"]["tokens_per_param"] == SMOLLM2.tokens_per_param
    assert TrainingHealth.from_dict(d) == h
