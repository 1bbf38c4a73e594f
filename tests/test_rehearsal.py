"""The rehearsal's one decision (harness/rehearsal.py): what a CPU run of a recipe changes, and the
table that says so for every setting. The run itself: tests/e2e/test_rehearsal_engine.py."""

from __future__ import annotations

import os

import pytest

from harness.errors import BadInput
from harness.recipe import load_recipe
from harness.rehearsal import CAPS, CPU_ONLY_STATUS, RAN, REPLACED, SHRUNK, local_copy, rehearsal_recipe

PRODUCTION = "train/kimi-k2.5.toml"


@pytest.fixture(scope="module")
def production():
    from harness.paths import REPO_ROOT

    recipe = load_recipe(REPO_ROOT / PRODUCTION)
    rehearsed, rows = rehearsal_recipe(recipe, "kimi_k25")
    return recipe, rehearsed, {r.key: r for r in rows}


def test_every_setting_has_one_row(production):
    recipe, _, rows = production
    written = recipe.model_dump(mode="json")
    keys = {f"{s}.{f}" for s, fields in written.items() if isinstance(fields, dict) for f in fields}
    assert set(rows) == keys


def test_the_production_programme_runs_as_written(production):
    """What makes the production run another program than CI's: all kept."""
    _, rehearsed, rows = production
    for key in (
        "bench.engine",
        "train.hidden_states_source",
        "train.hidden_states_mode",
        "train.launcher",
        "train.fsdp",
        "bench.temperature",
        "bench.thinking",
        "engine.dtype",
        "engine.reasoning_parser",
        "train.scheduler",
        "train.loss",
        "gate.tolerance",
    ):
        assert rows[key].status == RAN, rows[key]
    assert rehearsed.bench.engine == "server" and rehearsed.train.hidden_states_mode == "online"
    assert rehearsed.bench.temperature == [0.0, 1.0] and rehearsed.train.launcher == "torchrun"


def test_sizes_are_capped_never_raised(production):
    recipe, rehearsed, rows = production
    for key, cap in CAPS.items():
        section, field = key.split(".")
        written, new = getattr(getattr(recipe, section), field), getattr(getattr(rehearsed, section), field)
        assert new is not None and new <= cap and (written is None or new <= written), key
        assert rows[key].status in (RAN, SHRUNK)
    assert rows["train.nproc_per_node"].rehearsed == 2 and rows["train.num_prompts"].status == SHRUNK
    assert rehearsed.bench.k == [3] and rehearsed.bench.concurrency == [8]
    small = load_recipe(None)  # the CPU default is already small: nothing of it is raised
    again, small_rows = rehearsal_recipe(small, "kimi_k25")
    assert again.train.epochs == min(small.train.epochs, CAPS["train.epochs"])
    assert all(r.status != SHRUNK or r.rehearsed != r.written for r in small_rows)


def test_what_a_cpu_cannot_run_says_why_and_what_covers_it(production):
    _, rehearsed, rows = production
    for key in ("engine.device", "engine.gpu_memory_utilization", "engine.enforce_eager", "train.attn_impl"):
        assert rows[key].status == CPU_ONLY_STATUS and "covered by:" in rows[key].why, rows[key]
    assert rehearsed.engine.device == "cpu" and rehearsed.train.attn_impl == "sdpa"


def test_hub_datasets_become_local_copies_in_their_released_layouts(production):
    from harness.suites import load_suite

    _, rehearsed, rows = production
    assert rows["bench.suites"].status == SHRUNK and rows["train.prompts"].status == SHRUNK
    names = [load_suite(s, 3).name for s in rehearsed.bench.suites]
    assert names == ["mt-bench", "gsm8k", "humaneval", "math500"]
    with pytest.raises(BadInput, match="no local copy of 'hf:nobody/nothing'"):
        local_copy("hf:nobody/nothing")


def test_the_verifier_becomes_the_stand_in_of_its_architecture(production):
    _, rehearsed, rows = production
    assert rehearsed.verifier.standin == "kimi-k2.5" and rehearsed.verifier.standin_overrides["thinking"] is True
    assert rows["verifier.path"].status == REPLACED
    with pytest.raises(BadInput, match="no stand-in for verifier model_type 'mamba'"):
        rehearsal_recipe(load_recipe(None), "mamba")


def test_the_bench_runs_its_engines_as_the_production_node_does(production):
    """Two TP=8 engines do not fit one 8-GPU node: 'auto' runs them one at a time there, and the
    rehearsal runs that mode on the CPU, where 'auto' would run them side by side."""
    from harness.cluster import engine_schedule

    recipe, rehearsed, rows = production
    assert engine_schedule(recipe) == "one_at_a_time" and recipe.bench.engine_schedule == "auto"
    assert rehearsed.bench.engine_schedule == "one_at_a_time"
    row = rows["bench.engine_schedule"]
    assert (row.status, row.written, row.rehearsed) == (RAN, "auto", "one_at_a_time")
    assert "'auto' resolves to one_at_a_time there" in row.why
    cpu, cpu_rows = rehearsal_recipe(load_recipe(None), "kimi_k25")  # a CPU recipe: as written, no why
    assert cpu.bench.engine_schedule == "auto" and engine_schedule(cpu) == "side_by_side"
    assert not next(r for r in cpu_rows if r.key == "bench.engine_schedule").why


def test_rehearse_dry_run_prints_the_table_and_plan_and_writes_nothing(tmp_path):
    import subprocess
    import sys

    from harness.paths import REPO_ROOT

    out = tmp_path / "run"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "train-and-bench",
            PRODUCTION,
            "--rehearse",
            "--dry-run",
            "--run-dir",
            str(out),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        # a machine that has never built the stand-in: the plan reads its structure from a temporary copy
        env={**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "rehearsal: the recipe's settings" in p.stdout and "dry run of recipe kimi-k2.5-rehearsal" in p.stdout
    assert "'mode': 'online'" in p.stdout and "CpuHiddenStatesConnector" in p.stdout
    assert "not built yet: its structure" in p.stdout
    assert not out.exists() and not (tmp_path / "cache").exists()
