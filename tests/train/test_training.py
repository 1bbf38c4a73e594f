"""harness/train/training.py: the fit stage's bookkeeping around speculators' Trainer (the Trainer
itself runs in tests/e2e/test_train_e2e.py and every CI-size training)."""

from __future__ import annotations

import signal

import pytest

from harness import interrupts
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE


def test_a_fit_the_trainer_returned_from_after_a_signal_is_not_recorded_as_finished(tmp_path, monkeypatch):
    """speculators' Trainer saves a checkpoint and returns when SIGTERM lands mid-epoch; the stage
    must stop there, not write fit_result.json (which would make the rest of the job bench a draft
    trained for part of its epochs, and a rerun skip the fit)."""
    from harness.train import training

    def trainer_that_swallowed_sigterm(recipe, run_dir, plan, reporter):
        interrupts.record(signal.SIGTERM)  # the handler ran; the Trainer caught what it raised
        return {"train_tokens_per_epoch": 100}, [], []

    monkeypatch.setattr(training, "fit_config", lambda *a: object())
    monkeypatch.setattr(training, "_run_fit", trainer_that_swallowed_sigterm)
    recipe = load_recipe(PLAIN_RECIPE, ["train.hidden_states_mode='offline'"])
    try:
        with pytest.raises(KeyboardInterrupt):
            training.stage_fit(recipe, None, tmp_path, [2, 4, 5], None)
    finally:
        interrupts.clear()
    assert not (tmp_path / "fit_result.json").exists()
