"""What the plan costs (harness/plan/cost.py): the arithmetic by hand, the figures and where they come
from, the production recipe's dry run, and the same table built from a run folder's measurements
(harness/plan/cost_measured.py). Pure: no engine starts here."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from harness.paths import REPO_ROOT
from harness.plan.cost import HOUR, stage_costs, totals
from harness.plan.cost_measured import measured_costs
from harness.plan.cost_render import render_cost
from harness.plan.figures import (
    ASSUMPTION,
    CITED,
    CPU_DEFAULTS,
    DERIVED,
    FIGURES,
    MEASURED,
    RECIPE,
    Figure,
    active_params,
    by_key,
    default_figures,
    with_recipe,
)
from harness.plan.stages import Part, StageWork, bench_count
from harness.recipe import load_recipe

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def _figures(**values: float | None) -> dict[str, Figure]:
    return by_key([Figure(k, values.get(k), "u", ASSUMPTION, "test") for k in FIGURES])


def test_hours_are_starts_plus_tokens_over_rate_and_gpu_hours_are_hours_times_gpus():
    figs = _figures(engine_start_s=600, generate_tok_s=32, generate_concurrency=32, extract_tok_s=10, train_tok_s=1)
    works = [
        # 2 starts x 600 s + 36,000 tokens / 10 tok/s = 1,200 + 3,600 s = 4,800 s on 8 GPUs
        StageWork("extract", "", "extract_tok_s", (Part(36_000),), engine_starts=2, gpus=8),
        # 8 of 32 in flight: 32 x 8/32 = 8 tok/s -> 7,200 / 8 = 900 s; 64 in flight: capped at 32 tok/s -> 100 s
        StageWork("gen", "", "generate_tok_s", (Part(7_200, 8), Part(3_200, 64)), gpus=8),
        # 4 processes x 1 tok/s: 14,400 / 4 = 3,600 s on 4 GPUs
        StageWork("train", "", "train_tok_s", (Part(14_400),), gpus=4, processes=4),
    ]
    extract, gen, train = stage_costs(works, figs)
    assert extract.wall_s == 4_800 and extract.wall_h == pytest.approx(4_800 / 3_600)
    assert extract.gpu_h == pytest.approx(4_800 / 3_600 * 8)
    assert gen.wall_s == pytest.approx(900 + 100) and [p["wall_s"] for p in gen.parts] == [900, 100]
    assert train.wall_s == 3_600 and train.gpu_h == pytest.approx(4.0)
    total = totals([extract, gen, train])
    assert total["wall_h"] == round((4_800 + 1_000 + 3_600) / HOUR, 2) and total["complete"]
    assert total["gpu_h"] == round(4_800 / 3_600 * 8 + 1_000 / 3_600 * 8 + 4, 1)


def test_without_gpus_there_are_no_gpu_hours_and_a_missing_figure_says_so():
    figs = _figures(engine_start_s=10, generate_tok_s=100, generate_concurrency=None, train_tok_s=None)
    gen, train = stage_costs(
        [
            StageWork("gen", "", "generate_tok_s", (Part(1_000, 1),), engine_starts=1),  # no concurrency scaling
            StageWork("train", "", "train_tok_s", (Part(5),)),
        ],
        figs,
    )
    assert gen.wall_s == 10 + 1_000 / 100 and gen.gpu_h is None
    assert train.wall_s is None
    total = totals([gen, train])
    assert total["gpu_h"] is None and not total["complete"]


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


def _bench_recipe(*sets: str):
    base = ["bench.k=[1,2]", "bench.concurrency=[1,4]", "bench.temperature=[0.0]", "bench.repeats=2"]
    base += ["bench.reference_drafts=[]"]  # the CPU default benches a random draft beside its own
    base += ["bench.suites=['code','math']"]  # the suites of the counts below (plan.py _suite_requests)
    return load_recipe(
        None, [*base, "bench.max_tokens=10", "bench.machine_sentinel=false", "bench.warmup_requests=0", *sets]
    )


def test_bench_counts_arms_as_the_bench_runs_them():
    suites = (("code", 3), ("math", 5))
    c = bench_count(_bench_recipe(), suites)
    # 2 suites x 2 k x 2 concurrencies; the baseline once per (suite, concurrency); repeats x 2
    assert (c.cells, c.engines, c.speculative_arms, c.baseline_arms) == (8, 3, 16, 8)
    # per concurrency: (2 k + 1 baseline) x (3 + 5) requests x 10 tokens x 2 repeats
    assert c.tokens_by_concurrency == {1: 480, 4: 480} and c.requests == 96
    unshared = bench_count(_bench_recipe("bench.shared_baseline=false"), suites)
    assert unshared.baseline_arms == 16 and unshared.tokens_by_concurrency[1] == 640
    refs = bench_count(_bench_recipe("bench.reference_drafts=['oracle', 'random']"), suites)
    assert refs.engines == (1 + 2 * 2) + (1 + 2)  # the oracle comes with a verifier of its own
    sentinels = bench_count(_bench_recipe("bench.machine_sentinel=true"), suites)
    runs = 8 + (8 + 4) * 2 + 3  # one per cell, one after each measured arm, 3 to calibrate
    assert sentinels.overhead_tokens[4] == runs * 4 * 10  # no longer than the 10-token cells


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_production_dry_run_states_hours_gpu_hours_disk_and_assumptions():
    p = _harness("train-and-bench", str(KIMI), "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    cost = json.loads(p.stdout)["cost"]
    stages = {s["stage"]: s for s in cost["stages"]}
    assert list(stages) == ["responses", "hidden states (online)", "training", "bench"]
    # every stage on the node's 8 GPUs: the bench runs one TP8 engine at a time there (bench.engine_schedule)
    assert all(s["wall_h"] > 0 and s["gpus"] == 8 for s in stages.values())
    assert stages["responses"]["tokens"] == 50_000 * 2048
    assert stages["hidden states (online)"]["tokens"] == 50_000 * (2048 + 256) * 10  # every epoch, online
    assert cost["total"]["complete"] and cost["total"]["gpu_h"] == pytest.approx(
        sum(s["gpu_h"] for s in stages.values()), abs=0.2
    )
    assert sum(cost["total"]["gpu_h_share"].values()) == pytest.approx(1.0, abs=0.01)
    modes = cost["hidden_states_by_mode"]
    assert modes["planned"] == "online" and modes["offline"]["disk_gib"] > 5000 and modes["online"]["disk_gib"] < 20
    assert modes["offline"]["extraction_h"] < modes["online"]["extraction_h"]
    figs = {a["key"]: a for a in cost["assumptions"]}
    assert set(FIGURES) <= set(figs) and all(a["source"] for a in figs.values())

    text = _harness("train-and-bench", str(KIMI), "--dry-run").stdout
    for phrase in ("what the plan costs", "GPU-hours", "hidden states offline:", "hidden states online (planned):"):
        assert phrase in text, phrase
    assert "figures and their sources" in text and "lambda.ai" in text and "assumption" in text


def test_train_dry_run_costs_no_bench():
    from harness.plan.dry_run import dry_run_plan

    plan = dry_run_plan(load_recipe(KIMI), REPO_ROOT / "runs" / "x", include_bench=False)
    assert [s["stage"] for s in plan["cost"]["stages"]] == ["responses", "hidden states (online)", "training"]


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
    assert list(stages) == ["responses", "hidden states (offline)", "training", "bench"]
    resp = stages["responses"]
    assert resp["wall_s"] == 15 + 34_000 / 340 and resp["measured"]["wall_s"] == 110
    assert resp["measured"]["tok_s"] == 340 and resp["measured"]["ratio"] == round(110 / 115, 2)
    hidden = stages["hidden states (offline)"]
    assert hidden["wall_s"] == 10 and hidden["measured"]["ratio"] == 1.0 and hidden["engine_starts"] == 0
    assert stages["training"]["wall_s"] == 100 and stages["training"]["measured"]["ratio"] == 0.5
    bench = stages["bench"]  # 2 starts x 15 s + 3 arms' 1,020 tokens / 340 tok/s; measured 30 s + 4 s of arms
    assert bench["wall_s"] == 33 and bench["measured"]["wall_s"] == 34 and bench["measured"]["tok_s"] == 255
    assert cost["total"]["measured_wall_s"] == 110 + 10 + 50 + 34
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


def test_the_rehearsal_predicts_with_the_cpu_figures():
    from harness.rehearsal import REPLACED, rehearsal_recipe

    recipe = load_recipe(KIMI, ["cost.generate_tok_s=900"])
    rehearsed, rows = rehearsal_recipe(recipe, "kimi_k25")
    row = {r.key: r for r in rows}["cost.generate_tok_s"]
    assert row.status == REPLACED and rehearsed.cost.generate_tok_s is None


def test_planned_vs_measured_line_gives_each_stage_its_ratio():
    from harness.plan.cost_measured import planned_vs_measured

    cost = {
        "stages": [
            {"stage": "responses", "measured": {"wall_s": 119.0, "planned_wall_s": 66.0}},
            {"stage": "bench", "measured": {"wall_s": 182.0, "planned_wall_s": None}},
        ]
    }
    assert planned_vs_measured(cost) == "planned / measured: responses 66 s / 119 s (1.80x) · bench — / 182 s"
