"""The dry run (harness/plan/dry_run.py): the Kimi-K2.5 recipe resolved against the real structure without
weights or GPUs, and an impossible plan refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.paths import REPO_ROOT

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO_ROOT)


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


def test_dry_run_refuses_what_the_benchs_schedule_cannot_run_on_the_named_node():
    """The production node runs its bench one engine at a time; a race (every arm's engine up at once)
    would be refused when the bench starts, so the dry run refuses it first, in the bench's own line."""
    fixed_k = ["--set", "bench.k_from_one_engine=false", "--set", "bench.k_measured=[]"]
    p = _harness("train-and-bench", str(KIMI), "--dry-run", *fixed_k, "--set", "bench.race=true")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "runs engines one at a time on this plan" in p.stderr and "cannot run bench.race" in p.stderr
    assert _harness("train-and-bench", str(KIMI), "--dry-run", *fixed_k).returncode == 0


def test_a_dry_run_of_an_unbuilt_pretrained_verifier_says_how_to_build_it(tmp_path):
    """The pretrained verifier's structure comes from its wheel: a plan on an empty cache cannot read it,
    and says so in one line with the command that builds it (no download from a dry run)."""
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "harness", "train-and-bench", str(REPO_ROOT / "train" / "smollm2.toml"), "--dry-run"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    assert p.returncode == 2, p.stderr
    assert "harness verifier build smollm2-135m-instruct" in p.stderr and "Traceback" not in p.stderr
    assert not list(tmp_path.glob("pretrained/*"))  # nothing downloaded or built
