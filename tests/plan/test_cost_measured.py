"""The cost table built from a run folder's measurements beside the model's prediction
(harness/plan/cost_measured.py): what each stage took, online extraction inside training, planned vs
measured per stage."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from harness.plan.cost_measured import measured_costs
from harness.plan.cost_render import render_cost
from harness.recipe import load_recipe


def _write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _run_folder(tmp_path, online: bool = False):
    train = tmp_path / "train"
    session = {"engine_start_s": 10, "wall_s": 100, "output_tokens": 34_000, "requests": 512, "in_flight": 128}
    _write(train / "responses" / "timing.json", {"sessions": [session]})
    if online:
        _write(train / "hidden" / "done.json", {"mode": "online", "source": "vllm", "num_tokens": 1_000})
        _write(train / "fit_result.json", {"train_tokens": 1_000, "wall_s": 20, "world_size": 2})
    else:
        agreement = {"agreement": 0.99, "num_responses": 32, "forward_tokens": 2_380, "wall_s": 3}
        _write(train / "agreement.json", agreement)
        hidden = {"mode": "offline", "source": "transformers", "num_tokens": 11_900, "wall_s": 10}
        _write(train / "hidden" / "done.json", {**hidden, "engine_start_s": None})
        _write(train / "fit_result.json", {"train_tokens": 44_000, "wall_s": 50, "world_size": 1})
    _write(tmp_path / "manifest.json", {"engines": {"baseline": {"startup_s": 15}, "draft-k3": {"startup_s": 15}}})
    row = {"num_output_tokens": 340, "concurrency": 4}
    _write(
        tmp_path / "cells" / "A.json",
        [
            {**row, "cell_id": "A", "mode": "baseline", "baseline_cell": "A", "wall_s": 2},
            {**row, "cell_id": "A", "mode": "speculative", "baseline_cell": "A", "wall_s": 1},
        ],
    )
    _write(
        tmp_path / "cells" / "B.json",  # its baseline arm is A's, shared: counted once
        [
            {**row, "cell_id": "B", "mode": "baseline", "baseline_cell": "A", "wall_s": 2},
            {**row, "cell_id": "B", "mode": "speculative", "baseline_cell": "A", "wall_s": 1},
        ],
    )
    return tmp_path


# the hand-computed figures below: engine start 15 s, generation 340, extraction 1,190, training 440 tok/s
HAND_FIGURES = ["cost.engine_start_s=15", "cost.generate_tok_s=340", "cost.extract_tok_s=1190", "cost.train_tok_s=440"]


def test_measured_costs_put_what_a_run_took_beside_the_model(tmp_path):
    cost = measured_costs(_run_folder(tmp_path), load_recipe(None, HAND_FIGURES))
    stages = {s["stage"]: s for s in cost["stages"]}
    assert list(stages) == ["responses", "agreement", "hidden states (offline)", "training", "bench"]
    resp = stages["responses"]
    assert resp["wall_s"] == 15 + 34_000 / 340 and resp["measured"]["wall_s"] == 110
    assert resp["measured"]["tok_s"] == 340 and resp["measured"]["ratio"] == round(110 / 115, 2)
    agreement = stages["agreement"]  # the teacher-forced tokens at the extraction figure: 2,380 / 1,190
    assert agreement["wall_s"] == 2 and agreement["measured"]["wall_s"] == 3 and agreement["measured"]["ratio"] == 1.5
    hidden = stages["hidden states (offline)"]
    assert hidden["wall_s"] == 10 and hidden["measured"]["ratio"] == 1.0 and hidden["engine_starts"] == 0
    assert stages["training"]["wall_s"] == 100 and stages["training"]["measured"]["ratio"] == 0.5
    bench = stages["bench"]  # 2 starts x 15 s + 3 arms' 1,020 tokens / 340 tok/s; measured 30 s + 4 s of arms
    assert bench["wall_s"] == 33 and bench["measured"]["wall_s"] == 34 and bench["measured"]["tok_s"] == 255
    assert cost["total"]["measured_wall_s"] == 110 + 3 + 10 + 50 + 34
    out = io.StringIO()
    render_cost(cost, Console(file=out, width=200))
    assert "measured vs the model" in out.getvalue() and "figures and their sources" in out.getvalue()


def test_online_extraction_is_measured_inside_training(tmp_path):
    sets = ["train.hidden_states_source='vllm'", "train.hidden_states_mode='online'", "train.epochs=1"]
    cost = measured_costs(_run_folder(tmp_path, online=True), load_recipe(None, [*sets, *HAND_FIGURES]))
    stages = {s["stage"]: s for s in cost["stages"]}
    both = stages["hidden states + training (online)"]
    # the extraction server's start + 1,000 tokens / 1,190 tok/s, + 1,000 tokens / (440 x 2 processes)
    assert both["wall_s"] == pytest.approx(15 + 1_000 / 1_190 + 1_000 / 880, abs=0.1)
    assert both["measured"]["wall_s"] == 20 and both["measured"]["tok_s"] is None


def test_planned_vs_measured_line_gives_each_stage_its_ratio():
    from harness.plan.cost_measured import planned_vs_measured

    cost = {
        "stages": [
            {"stage": "responses", "measured": {"wall_s": 119.0, "planned_wall_s": 66.0}},
            {"stage": "bench", "measured": {"wall_s": 182.0, "planned_wall_s": None}},
        ],
        # the dry run's stages: one the run did not time still reads its plan
        "planned_wall_s": {"responses": 66.0, "agreement": 13.0, "bench": None},
    }
    assert planned_vs_measured(cost) == (
        "planned / measured: responses 66 s / 119 s (1.80x) · bench — / 182 s · agreement 13 s / —"
    )
