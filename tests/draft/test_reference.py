"""vLLM's draft_model method as a reference arm (bench.reference_drafts = ['draft_model']): the
verifier cut to its first N decoder layers (harness/draft/reference.py truncated_verifier), in the
verifier's own checkpoint layout, and the speculative config vLLM validates. The engine run:
tests/e2e/test_train_e2e.py (beside the trained draft, ngram and suffix, on the Kimi stand-in)."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from safetensors import safe_open

from harness.draft.reference import truncated_verifier
from harness.engine.settings import SpeculativeSpec
from harness.errors import BadInput
from harness.verifier.layout import resolve_layout
from tests.synthetic import LAYERS, kimi_like


def _keys(folder) -> set[str]:
    out: set[str] = set()
    for shard in folder.glob("*.safetensors"):
        with safe_open(str(shard), "pt") as f:
            out |= set(f.keys())
    return out


def test_truncated_verifier_keeps_the_first_layers_in_the_verifiers_own_layout(tmp_path):
    verifier = resolve_layout(kimi_like(tmp_path / "verifier"))
    out = truncated_verifier(verifier, 2, tmp_path / "cache")
    draft = resolve_layout(out)  # the same nested config and prefixes resolve, with fewer layers
    assert (draft.num_layers, draft.text_prefix, draft.multimodal) == (2, verifier.text_prefix, True)
    assert (draft.vocab_size, draft.hidden_size) == (verifier.vocab_size, verifier.hidden_size)
    kept, full = _keys(out), _keys(tmp_path / "verifier")
    dropped = full - kept
    assert dropped and all(
        k.startswith(verifier.decoder_prefix) and int(k[len(verifier.decoder_prefix) :].split(".")[0]) >= 2
        for k in dropped
    )
    assert {verifier.embed_tokens.key, verifier.lm_head.key, verifier.final_norm.key} <= kept
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == kept
    assert not (out / "standin.json").exists()  # not the verifier: no verifier identity
    assert truncated_verifier(verifier, 2, tmp_path / "cache") == out  # cached


@pytest.mark.parametrize("layers", [0, LAYERS])
def test_a_draft_model_as_deep_as_the_verifier_is_refused_in_one_line(tmp_path, layers):
    verifier = resolve_layout(kimi_like(tmp_path / "verifier"))
    with pytest.raises(BadInput) as e:
        truncated_verifier(verifier, layers, tmp_path / "cache")
    assert "bench.draft_model_layers" in e.value.message and "\n" not in e.value.message


def test_draft_model_config_is_one_vllm_accepts():
    from vllm.config import SpeculativeConfig

    cfg = SpeculativeSpec("draft_model", 3, "/somewhere").vllm_config()
    assert cfg == {"method": "draft_model", "num_speculative_tokens": 3, "model": "/somewhere"}
    # vLLM's method field: Optional[Literal[...]]; the methods it names
    methods = {m for t in get_args(SpeculativeConfig.__dataclass_fields__["method"].type) for m in get_args(t)}
    assert "draft_model" in methods
