"""VerifierLayout: what the loader resolves, and one clear error for each kind of bad input."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from harness.cli.app import app
from harness.errors import BadInput
from harness.verifier.layout import resolve_layout, validate_aux_layer_ids
from tests.synthetic import HIDDEN, VOCAB, kimi_like, llama_like


def test_kimi_layout_resolves_text_model_under_prefix(tmp_path):
    lay = resolve_layout(kimi_like(tmp_path / "k"))
    assert lay.multimodal and lay.text_model_type == "kimi_k2"
    assert lay.text_prefix == "language_model."
    assert lay.embed_tokens.key == "language_model.model.embed_tokens.weight"
    assert lay.lm_head.key == "language_model.lm_head.weight"
    assert lay.final_norm.key == "language_model.model.norm.weight"
    assert lay.embed_tokens.shape == (VOCAB, HIDDEN) and lay.final_norm.shape == (HIDDEN,)
    assert lay.num_shards == 2 and not lay.structure_only
    assert lay.default_aux_layer_ids == (2, 2, 1)  # vLLM's (2, L//2, L-3) for L=4
    # the vision tower's final_layernorm is a candidate name but is outside the text model
    assert lay.ignored_candidates["final_norm"] == ("vision_tower.encoder.final_layernorm.weight",)


def test_plain_llama_single_file(tmp_path):
    lay = resolve_layout(llama_like(tmp_path / "l"))
    assert lay.text_prefix == "" and not lay.multimodal
    assert lay.embed_tokens.key == "model.embed_tokens.weight" and lay.embed_tokens.shard == "model.safetensors"


def test_second_embed_outside_text_model_is_passed_over_not_picked(tmp_path):
    # An MTP-like block with a same-shaped embed_tokens under a *shorter* prefix: speculators'
    # shortest-suffix rule would pick it; the layout picks the text model's own and says so.
    lay = resolve_layout(kimi_like(tmp_path / "k", extra={"mtp.embed_tokens.weight": (VOCAB, HIDDEN)}))
    assert lay.embed_tokens.key == "language_model.model.embed_tokens.weight"
    assert "mtp.embed_tokens.weight" in lay.ignored_candidates["embed_tokens"]


def test_embed_only_outside_text_model_is_refused(tmp_path):
    from tests.synthetic import kimi_config, text_keys, write_checkpoint

    shapes = text_keys("language_model.")
    del shapes["language_model.model.embed_tokens.weight"]
    shapes["mtp.embed_tokens.weight"] = (VOCAB, HIDDEN)
    folder = write_checkpoint(tmp_path / "k", kimi_config(), shapes)
    with pytest.raises(BadInput, match="no embed_tokens under the text model's prefix.*weight_keys.embed_tokens"):
        resolve_layout(folder)
    # ... and naming it resolves it
    assert (
        resolve_layout(folder, {"embed_tokens": "mtp.embed_tokens.weight"}).embed_tokens.key
        == "mtp.embed_tokens.weight"
    )


def test_two_candidates_inside_text_model_are_refused(tmp_path):
    from tests.synthetic import kimi_config, text_keys, write_checkpoint

    shapes = text_keys("language_model.")
    del shapes["language_model.model.embed_tokens.weight"]
    shapes["language_model.a.embed_tokens.weight"] = (VOCAB, HIDDEN)
    shapes["language_model.b.embed_tokens.weight"] = (VOCAB, HIDDEN)
    with pytest.raises(BadInput, match="2 candidates for embed_tokens"):
        resolve_layout(write_checkpoint(tmp_path / "k", kimi_config(), shapes))


@pytest.mark.parametrize(
    "case,pattern",
    [
        ("no_config", "config.json: missing"),
        ("bad_json", r"config.json:\d+: malformed JSON"),
        ("no_weights", "no safetensors weights"),
        ("missing_shard", "names shard model-00002-of-00002.safetensors which is missing"),
        ("no_lm_head", "no lm_head tensor found.*tie_word_embeddings is false"),
        ("no_embed", "no token embedding tensor found"),
        ("bad_shape", r"has shape \[64, 32\] but the text config says \[64, 16\]"),
        ("corrupt_header", "corrupt safetensors header"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, case, pattern):
    from tests.synthetic import kimi_config, text_keys, write_checkpoint

    folder = tmp_path / "k"
    shapes = text_keys("language_model.")
    if case == "no_lm_head":
        del shapes["language_model.lm_head.weight"]
    if case == "no_embed":
        del shapes["language_model.model.embed_tokens.weight"]
    if case == "bad_shape":
        shapes["language_model.model.embed_tokens.weight"] = (VOCAB, 2 * HIDDEN)
    write_checkpoint(folder, kimi_config(), shapes)
    if case == "no_config":
        (folder / "config.json").unlink()
    if case == "bad_json":
        (folder / "config.json").write_text('{"model_type": "kimi_k25",\n "text_config": }')
    if case == "no_weights":
        for f in folder.glob("*.safetensors*"):
            f.unlink()
    if case == "missing_shard":
        (folder / "model-00002-of-00002.safetensors").unlink()
    if case == "corrupt_header":
        shard = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"][
            "language_model.model.embed_tokens.weight"
        ]
        data = (folder / shard).read_bytes()
        (folder / shard).write_bytes(data[:8] + b"{not json" + data[17:])
    with pytest.raises(BadInput, match=pattern):
        resolve_layout(folder)


def test_cli_inspect_bad_input_exit_2_one_line(tmp_path):
    folder = tmp_path / "nothing"
    folder.mkdir()
    res = CliRunner().invoke(app, ["verifier", "inspect", str(folder)])
    # the typer app raises; the console entry point turns HarnessError into exit 2
    assert isinstance(res.exception, BadInput)
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "harness", "verifier", "inspect", str(folder)], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().startswith("error:") and "config.json: missing" in p.stderr


def test_cli_inspect_json(tmp_path):
    folder = kimi_like(tmp_path / "k")
    res = CliRunner().invoke(app, ["verifier", "inspect", str(folder), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["num_layers"] == 4 and data["embed_tokens"]["key"] == "language_model.model.embed_tokens.weight"


def test_cli_inspect_bundled_real_kimi_structure():
    res = CliRunner().invoke(app, ["verifier", "inspect", "--reference", "kimi-k2.5", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert (data["num_layers"], data["hidden_size"], data["vocab_size"]) == (61, 7168, 163840)
    assert data["default_aux_layer_ids"] == [2, 30, 58] and data["num_tensors"] == 208_550
    assert data["lm_head"]["key"] == "language_model.lm_head.weight"
    res = CliRunner().invoke(app, ["verifier", "inspect", "--reference", "kimi-k3"])
    assert isinstance(res.exception, BadInput) and "bundled: kimi-k2.5" in str(res.exception)


@pytest.mark.parametrize(
    "ids,ok", [([2, 30, 58], True), ([0, 30, 58], False), ([2, 61, 58], False), ([2, 2, 58], False), ([], False)]
)
def test_aux_layer_ids(ids, ok):
    if ok:
        validate_aux_layer_ids(ids, 61)
    else:
        with pytest.raises(BadInput):
            validate_aux_layer_ids(ids, 61)


def test_no_weight_bytes_are_read(tmp_path, monkeypatch):
    """resolve_layout reads headers only: safetensors' loaders are never called."""
    import safetensors

    folder = kimi_like(tmp_path / "k")
    monkeypatch.setattr(safetensors, "safe_open", lambda *a, **k: pytest.fail("weights opened"))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("weights opened"))
    assert resolve_layout(folder).num_tensors > 0


def test_attention_kind_reads_key_value_heads():
    from harness.verifier.layout import attention_kind

    # SmolLM2-135M: 9 query heads, 3 key-value heads (GQA), which inspect once called MHA
    assert attention_kind({"num_key_value_heads": 3}, 9) == "gqa"
    assert attention_kind({"num_key_value_heads": 9}, 9) == "mha"
    assert attention_kind({}, 9) == "mha"  # absent: one per query head, as transformers reads it
    assert attention_kind({"num_key_value_heads": 1}, 8) == "mqa"
    assert attention_kind({"kv_lora_rank": 512, "num_key_value_heads": 64}, 64) == "mla"
