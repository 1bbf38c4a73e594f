"""resolve_layout against the reconstructed real Kimi-K2.5 structure (index only, no weights)."""

from __future__ import annotations

import json
import time

import pytest

from harness.errors import BadInput
from harness.verifier.bundled import REFERENCES, write_reference
from harness.verifier.layout import resolve_layout


@pytest.fixture(scope="module")
def k25_dir(tmp_path_factory):
    return write_reference("kimi-k2.5", tmp_path_factory.mktemp("kimi-k2.5"))


def test_kimi_k25_layout(k25_dir):
    t0 = time.perf_counter()
    lay = resolve_layout(k25_dir)
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0, f"resolve_layout took {elapsed:.2f}s on the real-size index"

    assert (lay.hidden_size, lay.num_layers, lay.vocab_size) == (7168, 61, 163840)
    assert lay.default_aux_layer_ids == (2, 30, 58)
    assert lay.embed_tokens.key == "language_model.model.embed_tokens.weight"
    assert lay.lm_head.key == "language_model.lm_head.weight"
    assert lay.final_norm.key == "language_model.model.norm.weight"
    assert lay.text_prefix == "language_model."
    assert lay.decoder_prefix == "language_model.model.layers."
    assert lay.structure_only is True
    assert lay.num_shards == 64
    assert 200_000 <= lay.num_tensors <= 215_000
    assert lay.attention == "mla"
    assert lay.multimodal and not lay.tie_word_embeddings
    q = lay.quantization
    assert q["method"] == "compressed-tensors"
    assert (q["bits"], q["group_size"]) == (4, 32)
    assert lay.embed_tokens.shard == "model-00062-of-000064.safetensors"


def test_kimi_k25_index_is_deterministic_and_real_sized(k25_dir, tmp_path):
    first = (k25_dir / "model.safetensors.index.json").read_bytes()
    again = write_reference("kimi-k2.5", tmp_path / "again") / "model.safetensors.index.json"
    assert again.read_bytes() == first
    index = json.loads(first)
    wm = index["weight_map"]
    assert len(wm) == 208_550  # the published tensor count of moonshotai/Kimi-K2.5
    assert 550 * 2**30 < index["metadata"]["total_size"] < 560 * 2**30
    assert not list(k25_dir.glob("*.safetensors"))  # structure only
    layer0 = "language_model.model.layers.0.mlp.down_proj.weight"
    assert wm[layer0] == "model-00001-of-000064.safetensors"
    assert wm["language_model.model.layers.60.mlp.experts.383.down_proj.weight_shape"] == (
        "model-00061-of-000064.safetensors"
    )
    assert wm["mm_projector.proj.2.weight"] == "model-00063-of-000064.safetensors"
    assert wm["vision_tower.encoder.blocks.26.wqkv.weight"] == "model-00064-of-000064.safetensors"
    gen = json.loads((k25_dir / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 163586


def test_unknown_reference_lists_known_names(tmp_path):
    with pytest.raises(BadInput) as e:
        write_reference("kimi-k9", tmp_path)
    for name in REFERENCES:
        assert name in e.value.message
