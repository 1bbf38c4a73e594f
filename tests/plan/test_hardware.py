"""The dry run's verdict is the truth on the hardware the recipe names ([cluster]): a failure it can
predict (GPU counts, memory, disk) exits 2 unless accepted by name, and 'no problems' means none."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from harness.cluster import baseline_repeats, engine_schedule
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.plan.dry_run import dry_run_plan
from harness.recipe import load_recipe

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def _plan(tmp_path, *sets: str, allow: list[str] | None = None) -> dict:
    return _cached_plan(sets, tuple(allow or ()))


@functools.cache
def _cached_plan(sets: tuple[str, ...], allow: tuple[str, ...]) -> dict:
    """A plan per settings, made once for the module (each is seconds: the bundled structure, the suites)."""
    return dry_run_plan(load_recipe(KIMI, list(sets)), REPO_ROOT / "runs" / "plan-fit" / "train", True, list(allow))


def _names(plan: dict, key: str = "predicted_failures") -> list[str]:
    return [f["name"] for f in plan["checks"][key]]


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_production_plan_fits_one_node(tmp_path):
    plan = _plan(tmp_path)
    assert plan["checks"]["ok"] and _names(plan) == [] and plan["checks"]["problems"] == []


def test_two_engines_side_by_side_on_one_node_is_predicted_to_fail(tmp_path):
    plan = _plan(tmp_path, "bench.engine_schedule='side_by_side'")
    assert _names(plan) == ["bench-engines"] and not plan["checks"]["ok"]
    assert "2 x 8 GPUs" in plan["checks"]["predicted_failures"][0]["message"]
    # two 8-GPU engines fit a 16-GPU node: auto then keeps them side by side, and nothing fails
    wide = load_recipe(KIMI, ["cluster.gpus_per_node=16"])
    assert engine_schedule(wide) == "side_by_side"
    assert _names(_plan(tmp_path, "cluster.gpus_per_node=16")) == []


def test_online_training_memory_is_budgeted_per_gpu(tmp_path):
    # the server's vLLM default share (0.9 of 141 GiB) leaves training 14 GiB of the ~32 it needs
    plan = _plan(tmp_path, "train.extraction_gpu_memory_utilization=0.9")
    [failure] = plan["checks"]["predicted_failures"]
    assert failure["name"] == "training-memory" and "between 0.6 and 0.77" in failure["message"]
    # too small a share starves the server: the weights alone are 69.3 GiB of each GPU
    starved = _plan(tmp_path, "train.extraction_gpu_memory_utilization=0.5")
    assert _names(starved) == ["extraction-memory"]
    budget = _plan(tmp_path)["memory_estimates"]["gpu_budget_online_training"]
    assert budget["extraction_gib"] == pytest.approx(0.75 * 141, abs=0.1)
    assert budget["of_which_verifier_weights_gib"] == 69.3 and budget["left_gib"] == pytest.approx(3.0, abs=0.1)


def test_gpu_counts_and_disk_are_checked(tmp_path):
    assert _names(_plan(tmp_path, "cluster.gpus_per_node=4")) == ["serving-gpus", "training-gpus"]
    assert _names(_plan(tmp_path, "cluster.disk_gib=10")) == ["disk"]
    # offline, the states are stored: ~6,150 GiB fit the node's 28,000 but not a 5,000 GiB disk
    offline = ("train.hidden_states_mode='offline'",)
    assert _names(_plan(tmp_path, *offline)) == []
    assert _names(_plan(tmp_path, *offline, "cluster.disk_gib=5000")) == ["disk"]


def test_a_predicted_failure_is_accepted_only_by_its_name(tmp_path):
    plan = _plan(tmp_path, "bench.engine_schedule='side_by_side'", allow=["bench-engines"])
    assert plan["checks"]["ok"] and _names(plan, "allowed") == ["bench-engines"] and _names(plan) == []
    with pytest.raises(BadInput, match="no such predicted failure"):
        _plan(tmp_path, allow=["bench-engine"])


def test_cli_exits_2_on_a_predicted_failure_and_0_when_allowed():
    p = _harness("train-and-bench", str(KIMI), "--dry-run", "--set", "bench.engine_schedule='side_by_side'")
    assert p.returncode == 2, p.stdout[-2000:]
    assert "predicted failure (bench-engines)" in p.stdout and "--allow NAME" in p.stderr
    assert "no problems" not in p.stdout
    ok = _harness(
        "train-and-bench", str(KIMI), "--dry-run", "--json", "--allow", "bench-engines",
        "--set", "bench.engine_schedule='side_by_side'",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert [f["name"] for f in json.loads(ok.stdout)["checks"]["allowed"]] == ["bench-engines"]


def test_one_engine_at_a_time_costs_one_instance_and_a_second_baseline_start(tmp_path):
    aba = _plan(tmp_path)["cost"]["stages"][-1]
    pair = _plan(tmp_path, "bench.engine_schedule='side_by_side'", "cluster.gpus_per_node=16")["cost"]["stages"][-1]
    assert aba["gpus"] == 8 and pair["gpus"] == 16
    assert aba["engine_starts"] == pair["engine_starts"] + 1  # the baseline before and after
    assert baseline_repeats(1) == (1, 1) and baseline_repeats(3) == (2, 1) and baseline_repeats(4) == (2, 2)


def test_measured_ks_and_prompt_caps_shrink_the_bench(tmp_path):
    full = _plan(
        tmp_path, "bench.k_from_one_engine=false", "bench.k_measured=[]", "bench.max_prompts_by_concurrency={}"
    )
    capped = _plan(tmp_path)
    count = lambda p: p["cost"]["stages"][-1]  # noqa: E731
    assert full["bench"]["measured_k"] == list(range(1, 9)) and capped["bench"]["measured_k"] == [3, 8]
    # 8 speculative engines -> 2; at concurrency 1 the arms send 16 of 80 prompts
    assert count(full)["engine_starts"] - count(capped)["engine_starts"] == 6
    c1 = {p["in_flight"]: p["tokens"] for p in count(capped)["parts"] if not p["label"]}
    c8 = {p["in_flight"]: p["tokens"] for p in count(full)["parts"] if not p["label"]}
    # arms per cell group: 2 speculative + the baseline before and after, against 8 + 2
    assert c1[1] * 80 * 10 == c8[1] * 16 * 4 and c1[8] * 10 == c8[8] * 4
    q = capped["bench"]["questions"]["by_concurrency"]
    assert q[1]["prompts"] == 16 and q[8]["prompts"] == 80
    assert q[1]["al_ci_half_width"] > q[8]["al_ci_half_width"]
