"""scripts/gpu_train_check.py without a GPU: the training path imports without vLLM, missing
modules are stubbed only when missing, and the pass conditions (docs/gpu-check.md) fail when they
should. The end-to-end CPU run of the script is in docs/gpu-check.md (it trains: run it by hand)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu_train_check.py"

NO_VLLM = """
import sys
class BlockVllm:
    def find_spec(self, name, path=None, target=None):
        if name == "vllm" or name.startswith("vllm."):
            raise ImportError(name + " blocked: the GPU machine has no vLLM")
sys.meta_path.insert(0, BlockVllm())
import harness.train.pipeline, harness.train.fit, harness.train.hidden_states, harness.train.vocab
import harness.verifier.hf_text, harness.verifier.loader
import speculators.train.trainer, speculators.train.data, speculators.models.eagle3
import importlib.util
spec = importlib.util.spec_from_file_location("gpu_train_check", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
loaded = [m for m in sys.modules if m.split(".")[0] == "vllm"]
assert not loaded, loaded
"""


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("gpu_train_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_training_path_imports_without_vllm():
    res = subprocess.run([sys.executable, "-c", NO_VLLM, str(SCRIPT)], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_only_missing_modules_are_stubbed_and_the_stub_refuses(check, monkeypatch):
    monkeypatch.setattr(
        check, "STUBBED_WHEN_MISSING", {"harness_no_such_module": ("load_from_disk",), "json": ("loads",)}
    )
    try:
        assert check.stub_missing_modules() == ["harness_no_such_module"]
        with pytest.raises(RuntimeError, match="not installed"):
            sys.modules["harness_no_such_module"].load_from_disk("x")
        import json

        assert json.loads("[1]") == [1]
    finally:
        sys.modules.pop("harness_no_such_module", None)


def _figures(**kw):
    fig = {
        "steps": 40,
        "loss_first": 9.0,
        "loss_last": 4.0,
        "held_out_full_acc": [0.5, 0.3, 0.2],
        "attn_impl": "simple_flex_attention",
        "fit_device": "cuda:0",
        "loss_implementation": "fused",
        "fused_triton_losses_loaded": True,
    }
    return {**fig, **kw}


def _args(check, device="cuda", attn="simple_flex_attention"):
    return check.parse_args(["--standin", "x", "--device", device, "--attn-impl", attn, "--steps", "40"])


def test_checks_pass_on_a_good_cuda_run(check):
    assert all(check.checks(_figures(), _args(check)).values())


@pytest.mark.parametrize(
    ("change", "failed"),
    [
        ({"loss_last": 9.5}, ["loss_decreased"]),
        ({"loss_last": float("nan")}, ["loss_finite", "loss_decreased"]),
        ({"steps": 12}, ["ran_requested_steps"]),
        ({"held_out_full_acc": [0.5]}, ["held_out_acc_per_ttt_step"]),
        ({"attn_impl": "sdpa"}, ["attn_impl_as_requested"]),
        ({"fit_device": "cpu"}, ["trained_on_cuda"]),
        ({"loss_implementation": "eager"}, ["fused_losses"]),
        ({"fused_triton_losses_loaded": False}, ["fused_losses"]),
    ],
)
def test_each_check_fails_when_its_condition_does_not_hold(check, change, failed):
    res = check.checks(_figures(**change), _args(check))
    assert [k for k, ok in res.items() if not ok] == failed


def test_a_cpu_run_is_not_asked_for_cuda_or_fused_losses(check):
    res = check.checks(
        _figures(attn_impl="sdpa", fit_device="cpu", loss_implementation="eager", fused_triton_losses_loaded=False),
        _args(check, "cpu", "sdpa"),
    )
    assert res == {
        "ran_requested_steps": True,
        "loss_finite": True,
        "loss_decreased": True,
        "held_out_acc_per_ttt_step": True,
        "attn_impl_as_requested": True,
    }
