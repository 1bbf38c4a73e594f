"""Safetensors headers (harness/verifier/safetensors_index.py): a truncated or badly tiled
shard, of a draft or a verifier, is bad input naming the file."""

from __future__ import annotations

import json
import uuid

from harness.verifier.safetensors_index import TensorInfo, coverage_problem
from tests.fault_helpers import _draft, _write_safetensors, one_line, run_cli


def test_truncated_draft_shard_is_bad_input_naming_the_draft(tmp_path, capsys, monkeypatch):
    draft = _draft(tmp_path / "draft")
    shard = draft / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-5])
    code, err = run_cli(capsys, monkeypatch, "bench", "--draft", str(draft), "--run-id", f"faults-{uuid.uuid4().hex}")
    assert code == 2
    assert str(shard) in one_line(err) and "truncated" in err


def test_truncated_verifier_shard_fails_inspect_and_dry_run(tmp_path, capsys, monkeypatch):
    v = tmp_path / "verifier"
    v.mkdir()
    (v / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "num_hidden_layers": 1,
                "hidden_size": 4,
                "vocab_size": 8,
                "num_attention_heads": 1,
            }
        )
    )
    _write_safetensors(
        v / "model.safetensors",
        {
            "model.embed_tokens.weight": ("F32", [8, 4], 4),
            "model.layers.0.mlp.weight": ("F32", [4, 4], 4),
            "model.norm.weight": ("F32", [4], 4),
            "lm_head.weight": ("F32", [8, 4], 4),
        },
    )
    code, _ = run_cli(capsys, monkeypatch, "verifier", "inspect", str(v))
    assert code == 0  # the intact checkpoint passes: the check below is about the truncation
    shard = v / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1])
    code, err = run_cli(capsys, monkeypatch, "verifier", "inspect", str(v))
    assert code == 2 and str(shard) in one_line(err) and "truncated" in err
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'name = "truncated"\n[verifier]\npath = "{v}"\n')
    code, err = run_cli(capsys, monkeypatch, "train-and-bench", str(recipe), "--dry-run")
    assert code == 2 and str(shard) in one_line(err)


def test_header_offsets_must_tile_the_data_exactly():
    infos = {"a": TensorInfo("F32", (2,)), "b": TensorInfo("F32", (2,))}
    assert coverage_problem([(0, 8, "a"), (8, 16, "b")], infos, 16) is None
    assert "overlaps" in coverage_problem([(0, 8, "a"), (4, 12, "b")], infos, 12)
    assert "gap" in coverage_problem([(0, 8, "a"), (12, 20, "b")], infos, 20)
    assert "truncated" in coverage_problem([(0, 8, "a"), (8, 16, "b")], infos, 15)
    assert "needs 8" in coverage_problem([(0, 8, "a"), (8, 12, "b")], infos, 12)
