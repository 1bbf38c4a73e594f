"""Issue 51: training that says when it did not work. A draft trained on a tenth of the CI's
training data (tests/conftest.py CI_TRAIN: its prompts, tokens, epochs and learning rate; states
from the test bed's default transformers forward, one engine start fewer) is flagged before its
bench, with the reason, and `train.on_unhealthy = 'stop'` ends the main job there: exit 2, one
line, no bench engine started, the trained draft kept."""

from __future__ import annotations

import json

import pytest

from harness.errors import EXIT_BAD_INPUT, BadInput
from harness.recipe import load_recipe
from harness.ui import Reporter
from tests.conftest import CI_TRAIN, PLAIN_RECIPE

pytestmark = pytest.mark.slow

CI_PROMPTS = int(next(s.split("=")[1] for s in CI_TRAIN if s.startswith("train.num_prompts=")))
TENTH = [s for s in CI_TRAIN if not s.startswith(("train.num_prompts=", "train.hidden_states_source="))] + [
    f"train.num_prompts={CI_PROMPTS // 10}"
]


def test_a_draft_trained_on_a_tenth_of_the_ci_data_is_flagged_before_its_bench(kimi_standin, tmp_path):
    from harness.main_job import run_train_and_bench

    # 4 agreement samples: the gate's greedy transformers generation is not what this test is about
    recipe = load_recipe(
        PLAIN_RECIPE, [*TENTH, "train.agreement_samples=4", "train.on_unhealthy='stop'", "gate.baseline=''"]
    )
    run_dir = tmp_path / "job"
    with pytest.raises(BadInput) as e:
        run_train_and_bench(recipe, Reporter(), run_dir)
    line = e.value.message
    assert e.value.exit_code == EXIT_BAD_INPUT and "\n" not in line
    assert line.startswith("training UNHEALTHY: too few samples"), line
    assert "train.num_prompts=" in line and "stopped before the bench" in line  # what would help, what happened
    # before any bench engine: the bench writes its manifest before it starts one
    assert not (run_dir / "manifest.json").exists() and not (run_dir / "cells").exists()
    assert (run_dir / "train" / "draft" / "harness.json").is_file()  # the draft is kept
    health = json.loads((run_dir / "train" / "train_report.json").read_text())["health"]
    assert health["healthy"] is False
    assert "too few samples" in [f["reason"] for f in health["findings"]]
    assert health["figures"]["tokens_per_param"] < 0.02
