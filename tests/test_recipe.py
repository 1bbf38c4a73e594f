"""Recipes (harness/recipe.py) are validated before anything runs (every problem at once), `--set`
problems are blamed on --set, `recipe show` prints the resolved recipe. The Kimi-K2.5 dry run:
tests/plan/test_dry_run.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from tests.fault_helpers import run_cli


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_default_recipe_loads_and_overrides_apply():
    r = load_recipe(None, ["train.epochs=7", "bench.k=[1,2]", "verifier.standin='llama'"])
    assert r.name == "tiny-kimi" and r.train.epochs == 7 and r.bench.k == [1, 2]
    assert r.verifier.standin == "llama"


def test_every_problem_is_listed_at_once(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("""
name = "bad"
[verifier]
standin = "kimi-k2.5"
[train]
epochz = 3
lr = -1
prompts = "missing.jsonl"
[bench]
temperature = [-0.5]
rejection_sample_method = "synthetic"
""")
    with pytest.raises(BadInput) as e:
        load_recipe(bad)
    msg = e.value.message
    assert "train.epochz: unknown key" in msg
    assert "train.lr" in msg
    assert "bench" in msg and "synthetic" in msg


def test_missing_file_and_unknown_suite_are_reported(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\n[verifier]\nstandin = "llama"\n[train]\nprompts = "nope.jsonl"\n'
        '[bench]\nsuites = ["chat", "nosuch"]\n'
    )
    with pytest.raises(BadInput) as e:
        load_recipe(bad)
    assert "train.prompts: nope.jsonl does not exist" in e.value.message
    assert "unknown suite 'nosuch'" in e.value.message and "known: chat, code" in e.value.message


def test_incompatible_combination_is_refused():
    with pytest.raises(BadInput, match="needs GPUs: vLLM-CPU has no Ray executor"):
        load_recipe(None, ["engine.distributed_executor_backend='ray'"])


def test_a_sequential_budget_needs_the_baseline_draft_and_changes_the_runs_identity():
    """gate.max_prompts draws paired cells in rounds: without a baseline draft there is nothing to pair,
    and a budget changes what the bench measures, so the run folder's name (the rest of [gate] only judges)."""
    with pytest.raises(BadInput, match="gate.max_prompts draws a paired cell's prompts in rounds"):
        load_recipe(None, ["gate.max_prompts=40"])
    plain = load_recipe(None, ["gate.baseline_draft='/d'"])
    rounds = load_recipe(None, ["gate.baseline_draft='/d'", "gate.max_prompts=40"])
    assert plain.fingerprint() == load_recipe(None, ["gate.baseline_draft='/d'", "gate.tolerance=0.1"]).fingerprint()
    assert rounds.fingerprint() != plain.fingerprint()


def test_a_race_is_refused_where_its_engines_cannot_all_run_and_changes_the_runs_identity():
    """bench.race holds every arm's engine up on a closed loop and draws its own rounds: refused in one line
    beside another round-drawing design and the settings it cannot run; it changes what the bench
    measures (the run folder's name), its round size at the default does not rename older folders."""
    with pytest.raises(BadInput, match=r"gate.max_prompts .* and bench.race .* set one of them"):
        load_recipe(None, ["gate.baseline_draft='/d'", "gate.max_prompts=40", "bench.race=true"])
    for bad in (["bench.k_from_one_engine=true"], ["bench.engine='server'", "bench.request_rate=[2]"]):
        with pytest.raises(BadInput, match="bench.race runs every arm's engine at once on a closed loop"):
            load_recipe(None, ["bench.race=true", *bad])
    plain, raced = load_recipe(None, []), load_recipe(None, ["bench.race=true"])
    assert raced.fingerprint() != plain.fingerprint()
    assert plain.fingerprint() == load_recipe(None, ["bench.race_round_prompts=8"]).fingerprint()


def test_vllm_hidden_states_on_cpu_plan_the_connector_workaround(tmp_path):
    """vLLM's extraction runs on CPU through the harness's connector subclass, and the plan says so."""
    from harness.train.vllm_states import CPU_CONNECTOR, CPU_CONNECTOR_MODULE, extraction_plan
    from harness.verifier.layout import resolve_layout
    from tests.synthetic import llama_like

    recipe = load_recipe(None, ["train.hidden_states_source='vllm'"])
    layout = resolve_layout(llama_like(tmp_path / "l"))
    plan = extraction_plan(recipe.engine, layout, [2, 4, 5], tmp_path)
    kv = plan.engine_kwargs["kv_transfer_config"]
    assert (kv["kv_connector"], kv["kv_connector_module_path"]) == (CPU_CONNECTOR, CPU_CONNECTOR_MODULE)
    assert plan.engine_kwargs["speculative_config"]["method"] == "extract_hidden_states"
    assert any("CpuHiddenStatesConnector" in w for w in plan.workarounds)
    gpu = extraction_plan(recipe.engine.model_copy(update={"device": "cuda"}), layout, [2, 4, 5], tmp_path)
    assert gpu.engine_kwargs["kv_transfer_config"]["kv_connector"] == "ExampleHiddenStatesConnector"
    assert not any("CpuHiddenStatesConnector" in w for w in gpu.workarounds)


def test_recipe_show_prints_resolved_recipe():
    p = _harness("recipe", "show", "--set", "train.epochs=9")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["train"]["epochs"] == 9


def test_set_problems_are_blamed_on_set_not_the_recipe(capsys, monkeypatch):
    code, err = run_cli(capsys, monkeypatch, "recipe", "show", "--set", "train.epochs='many'")
    assert code == 2 and err.startswith("error: --set:") and "train.epochs" in err
