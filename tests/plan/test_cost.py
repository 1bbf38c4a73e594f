"""What the plan costs (harness/plan/cost.py): the arithmetic by hand, the bench's arms counted, the
production recipe's dry run. Pure: no engine starts here. The figures and where they come from:
tests/plan/test_figures.py; the same table built from a run folder's measurements:
tests/plan/test_cost_measured.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.paths import REPO_ROOT
from harness.plan.cost import HOUR, stage_costs, totals
from harness.plan.figures import (
    ASSUMPTION,
    FIGURES,
    Figure,
    by_key,
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


def test_a_sequential_budget_is_priced_at_every_prompt_and_says_so():
    """A sequential pair stops when its verdict settles, which no plan knows ahead: the cost is the
    upper bound, every prompt, and the stage's note says the budget and that it stops earlier."""
    from harness.plan.stages import bench_work

    plain = _bench_recipe("gate.baseline_draft='/d'")
    rounds = _bench_recipe("gate.baseline_draft='/d'", "gate.max_prompts=4")
    suites = (("code", 3), ("math", 5))
    assert bench_count(rounds, suites) == bench_count(plain, suites)
    note = bench_work(rounds, bench_count(rounds, suites), 1).note
    assert "sequential paired cells priced at every prompt" in note and "gate.max_prompts = 4" in note
    assert "sequential" not in bench_work(plain, bench_count(plain, suites), 1).note


def test_a_race_is_priced_at_every_prompt_with_every_engine_up_at_once():
    """A raced setting stops arms when their rank settles, which no plan knows ahead: the upper bound,
    every prompt for every arm, and the GPUs of every engine up together (the race's condition)."""
    from harness.plan.stages import bench_work

    plain, raced = _bench_recipe(), _bench_recipe("bench.race=true")
    suites = (("code", 3), ("math", 5))
    count = bench_count(raced, suites)
    assert count == bench_count(plain, suites) and count.engines > 2
    work = bench_work(raced, count, 1)
    assert "raced settings priced at every prompt for every arm" in work.note and "every engine up at once" in work.note
    assert work.gpus == count.engines and bench_work(plain, count, 1).gpus == 2


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


def test_the_rehearsal_predicts_with_the_cpu_figures():
    from harness.rehearsal import REPLACED, rehearsal_recipe

    recipe = load_recipe(KIMI, ["cost.generate_tok_s=900"])
    rehearsed, rows = rehearsal_recipe(recipe, "kimi_k25")
    row = {r.key: r for r in rows}["cost.generate_tok_s"]
    assert row.status == REPLACED and rehearsed.cost.generate_tok_s is None
