"""Recipes are validated before anything runs (every problem at once); the Kimi-K2.5 dry run
resolves the production plan against the real structure without weights or GPUs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from tests.fault_helpers import run_cli

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


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


def test_kimi_dry_run_matches_real_structure():
    p = _harness("train-and-bench", str(KIMI), "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    v = plan["verifier"]
    assert (v["num_layers"], v["hidden_size"], v["vocab_size"]) == (61, 7168, 163840)
    assert v["default_aux_layer_ids"] == [2, 30, 58] and plan["draft"]["aux_layer_ids"] == [2, 30, 58]
    assert v["embed_tokens"].startswith("language_model.model.embed_tokens.weight")
    assert plan["parallelism"]["tensor_parallel_size"] == 8 and plan["parallelism"]["training_processes"] == 8
    cmd = plan["responses"]["engine_command"]
    for flag in (
        "--tensor-parallel-size 8",
        "--trust-remote-code",
        "--tool-call-parser kimi_k2",
        "--reasoning-parser kimi_k2",
        "/models/moonshotai/Kimi-K2.5",
    ):
        assert flag in cmd, flag
    assert plan["training"]["command"].startswith("torchrun --nproc_per_node=8")
    assert plan["draft"]["draft_vocab_size"] == 32000
    # the production plan fits its one 8xH200 node: nothing predicted to fail, nothing allowed by name
    assert plan["checks"]["predicted_failures"] == [] == plan["checks"]["allowed"]
    # online: the extraction server takes 0.75 of each GPU, training the rest, with room to spare
    budget = plan["memory_estimates"]["gpu_budget_online_training"]
    assert budget["extraction_fraction"] == 0.75 and budget["left_gib"] > 0
    assert budget["fractions_that_fit"][0] <= 0.75 <= budget["fractions_that_fit"][1]
    assert "--gpu-memory-utilization 0.75" in plan["hidden_states"]["extraction_command"]
    # the bench runs one TP8 engine at a time on the node (baseline, speculative, baseline)
    assert plan["bench"]["engine_schedule"] == "one_at_a_time" and plan["cost"]["stages"][-1]["gpus"] == 8
    # online: a bounded cache where offline would store terabytes: 8 ranks x 4 loader workers + 1 samples
    hs = plan["hidden_states"]
    assert hs["mode"] == "online" and hs["disk_by_mode"]["offline"]["disk_gib"] > 5000
    assert (
        hs["disk_by_mode"]["online"]["disk_gib"]
        == hs["estimated_disk_gib"]
        == round(33 * 8192 * 4 * 7168 * 2 / 2**30, 2)
    )
    assert plan["memory_estimates"]["verifier_weights_gib_per_gpu"] < 141
    assert plan["bench"]["k"] == [1, 2, 3, 4, 5, 6, 7, 8] and plan["checks"]["ok"]
    # a bench sized by its answers: at most a quarter of the plan's GPU-hours, every question answered
    assert plan["cost"]["total"]["gpu_h_share"]["bench"] <= 0.25
    assert plan["bench"]["measured_k"] == [3, 8]
    assert set(plan["bench"]["questions"]) >= {"best k per load", "speedup per suite", "thinking on/off", "T = 0 / 1"}


def test_dry_run_refuses_an_impossible_plan():
    p = _harness(
        "train",
        str(KIMI),
        "--dry-run",
        "--set",
        "engine.tensor_parallel_size=7",
        "--set",
        "draft.aux_layer_ids=[2, 30, 61]",
    )
    assert p.returncode == 2
    assert "does not divide 64 attention heads" in p.stderr and "out of range" in p.stderr
    assert "Traceback" not in p.stderr


def test_set_problems_are_blamed_on_set_not_the_recipe(capsys, monkeypatch):
    code, err = run_cli(capsys, monkeypatch, "recipe", "show", "--set", "train.epochs='many'")
    assert code == 2 and err.startswith("error: --set:") and "train.epochs" in err
