"""vLLM's suffix decoding as a reference arm (bench.reference_drafts = ['suffix']): the speculative
config vLLM validates, and the one-line refusal when its dependency (arctic-inference) is missing.
The engine run: tests/e2e/test_train_e2e.py (beside the trained draft and ngram, on the Kimi stand-in)."""

from __future__ import annotations

import importlib.util

import pytest

from harness.draft.under_test import require_suffix_decoding, resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.engine.settings import SpeculativeSpec
from harness.errors import BadInput
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE


def test_suffix_config_is_one_vllm_accepts_with_its_tree_defaults():
    from vllm.config import SpeculativeConfig

    cfg = SpeculativeSpec("suffix", 3).vllm_config()
    assert cfg == {"method": "suffix", "num_speculative_tokens": 3}  # no draft model, vLLM's tree defaults
    vllm = SpeculativeConfig(**cfg)  # validates the method and imports arctic-inference
    assert (vllm.method, vllm.num_speculative_tokens, vllm.suffix_decoding_max_tree_depth) == ("suffix", 3, 24)


def test_suffix_reference_without_arctic_inference_is_refused_in_one_line(monkeypatch, kimi_standin):
    recipe = load_recipe(PLAIN_RECIPE, ["bench.reference_drafts=['ngram','suffix']", "bench.engine='offline'"])
    layout = resolve_verifier(recipe)
    assert [d.method for d in resolve_drafts(recipe, layout, None)][-2:] == ["ngram", "suffix"]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "arctic_inference" else real(n, *a))
    with pytest.raises(BadInput) as e:
        require_suffix_decoding()
    assert "arctic-inference" in e.value.message and "\n" not in e.value.message
    with pytest.raises(BadInput):
        resolve_drafts(recipe, layout, None)
