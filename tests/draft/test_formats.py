"""Drafts in every format vLLM serves are recognised from the folder alone (harness/draft/formats.py),
`draft inspect` and the bench refuse a bad one before any engine starts, and a warm start loads an init
draft's weights. Fast: tiny hand-written checkpoints (tests/draft_fixtures.py). The fit checks:
tests/draft/test_fit_check.py and test_guard.py; conversion: tests/draft/test_convert.py."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import torch

from harness.draft.convert import to_specforge
from harness.draft.fit_check import draft_problems
from harness.draft.formats import inspect_draft
from harness.engine.settings import SpeculativeSpec
from harness.errors import BadInput
from harness.verifier.layout import resolve_layout
from tests.draft_fixtures import (
    DRAFT_VOCAB,
    built_draft,
    mla_draft,
    mtp_verifier,
    specforge_draft,
    speculators_draft,
)
from tests.synthetic import HIDDEN, LAYERS, VOCAB, kimi_like

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- recognition


@pytest.mark.parametrize(
    "make, fmt, method, arch",
    [
        (lambda p: speculators_draft(p), "speculators", "eagle3", "speculators:eagle3 (llama layer)"),
        (lambda p: speculators_draft(p, kind="peagle"), "speculators", "peagle", "speculators:peagle (llama layer)"),
        (lambda p: specforge_draft(p), "specforge", "eagle3", "LlamaForCausalLMEagle3"),
        (lambda p: specforge_draft(p, "Eagle3LlamaForCausalLM"), "specforge", "eagle3", "Eagle3LlamaForCausalLM"),
        (lambda p: specforge_draft(p, "Eagle3Qwen3ForCausalLM"), "specforge", "eagle3", "Eagle3Qwen3ForCausalLM"),
        (lambda p: mla_draft(p), "mla-eagle3", "eagle3", "Eagle3DeepseekV3ForCausalLM"),
        (lambda p: mla_draft(p, "Eagle3DeepseekV2ForCausalLM"), "mla-eagle3", "eagle3", "Eagle3DeepseekV2ForCausalLM"),
        (lambda p: specforge_draft(p, "PEagleDraftModel"), "p-eagle", "peagle", "PEagleDraftModel"),
    ],
)
def test_every_eagle_format_is_recognised_with_its_shape(tmp_path, kimi, make, fmt, method, arch):
    info = inspect_draft(make(tmp_path / "d"))
    assert (info.format, info.method, info.architecture) == (fmt, method, arch)
    assert info.vllm_method == "eagle3" and info.num_layers == 1 and info.hidden_size == HIDDEN
    assert info.aux_layer_ids == (1, 2, 3) and info.fc_shape == (HIDDEN, 3 * HIDDEN)
    assert (info.draft_vocab_size, info.target_vocab_size, info.has_d2t, info.has_t2d) == (
        DRAFT_VOCAB,
        VOCAB,
        True,
        True,
    )
    assert info.content_hash["sha256"]
    assert draft_problems(info, kimi) == []


def test_mtp_layers_of_a_verifier_are_its_draft(tmp_path):
    v = mtp_verifier(tmp_path / "v")
    info = inspect_draft(v)
    assert (info.format, info.method, info.num_layers, info.fc_shape) == ("mtp", "mtp", 1, (HIDDEN, 2 * HIDDEN))
    assert draft_problems(info, resolve_layout(v)) == []
    assert SpeculativeSpec("mtp", 1, str(v)).vllm_config() == {"method": "mtp", "num_speculative_tokens": 1}


def test_mtp_refused_for_another_verifier_or_without_its_layers(tmp_path, kimi):
    v = mtp_verifier(tmp_path / "v")
    assert "MTP layers draft only for the checkpoint that holds them" in draft_problems(inspect_draft(v), kimi, "x")[0]
    bare = mtp_verifier(tmp_path / "bare", with_layers=False)
    assert "saved without its MTP layers" in draft_problems(inspect_draft(bare), resolve_layout(bare))[0]


def test_peagle_is_served_as_eagle3_with_parallel_drafting():
    assert SpeculativeSpec("peagle", 3, "/d").vllm_config() == {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "model": "/d",
        "parallel_drafting": True,
    }


def test_unknown_format_names_the_formats_it_knows(tmp_path):
    with pytest.raises(
        BadInput,
        match="unknown draft format.*speculators.*LlamaForCausalLMEagle3.*"
        "Eagle3DeepseekV3ForCausalLM.*PEagleDraftModel.*num_nextn_predict_layers",
    ):
        inspect_draft(kimi_like(tmp_path / "v"))  # a verifier without MTP layers is no draft


def test_malformed_config_names_the_file(tmp_path):
    d = speculators_draft(tmp_path / "d")
    (d / "config.json").write_text('{"speculators_model_type": "eagle3",')
    with pytest.raises(BadInput, match=r"config\.json:1: malformed JSON"):
        inspect_draft(d)


# ----------------------------------------------------------------------------- command line


def _harness(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """The CLI in-process, as a user runs it: exit code, stdout, stderr."""
    from harness.cli.entry import main

    monkeypatch.setattr(sys, "argv", ["harness", *args])
    with pytest.raises(SystemExit) as e:
        main()
        raise SystemExit(0)
    out = capsys.readouterr()
    return e.value.code or 0, out.out, out.err


def test_draft_inspect_json_and_fit(tmp_path, capsys, monkeypatch):
    v = kimi_like(tmp_path / "v")
    d = specforge_draft(tmp_path / "d")
    code, stdout, stderr = _harness(capsys, monkeypatch, "draft", "inspect", str(d), "--verifier", str(v), "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    assert (out["format"], out["method"], out["fits"], out["aux_layer_ids"]) == ("specforge", "eagle3", True, [1, 2, 3])
    bad = speculators_draft(tmp_path / "bad", aux_ids=(1, 2, 9))
    code, stdout, _ = _harness(capsys, monkeypatch, "draft", "inspect", str(bad), "--verifier", str(v))
    assert code == 2 and "does not fit" in stdout and "do not exist in a 4-layer verifier" in stdout


@pytest.mark.parametrize("case", ["hidden", "d2t", "aux", "unknown"])
def test_bench_refuses_a_bad_draft_in_one_line_before_any_engine(tmp_path, capsys, monkeypatch, case):
    v = kimi_like(tmp_path / "v")
    draft = {
        "hidden": lambda p: speculators_draft(p, hidden=2 * HIDDEN),
        "d2t": lambda p: speculators_draft(p, shift=VOCAB),
        "aux": lambda p: speculators_draft(p, aux_ids=(1, 2, LAYERS)),
        "unknown": lambda p: kimi_like(p),
    }[case](tmp_path / "d")
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'name = "t"\n[verifier]\npath = "{v}"\n')
    run_id = f"test-refuse-{uuid.uuid4().hex[:8]}"
    code, _, stderr = _harness(capsys, monkeypatch, "bench", str(recipe), "--draft", str(draft), "--run-id", run_id)
    assert code == 2, stderr
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert {
        "hidden": "draft hidden size 32",
        "d2t": "outside the verifier's vocabulary",
        "aux": "do not exist in a 4-layer verifier",
        "unknown": "unknown draft format",
    }[case] in lines[0]
    assert not (REPO / "results" / "runs" / run_id).exists()  # no run started, so no engine either


# ----------------------------------------------------------------------------- warm start


@pytest.mark.parametrize("fmt", ["speculators", "specforge"])
def test_warm_start_loads_the_init_drafts_weights(tmp_path, kimi, fmt):
    from harness.draft.warm_start import warm_start

    trained = built_draft(kimi, seed=1)
    trained.save_pretrained(str(tmp_path / "spec"))
    init = tmp_path / "spec" if fmt == "speculators" else to_specforge(tmp_path / "spec", tmp_path / "sf")
    fresh = built_draft(kimi, seed=2)
    assert not torch.equal(fresh.fc.weight, trained.fc.weight)
    done = warm_start(fresh, init, kimi)
    assert done["format"] == fmt and done["lm_head_rows_from_init"] == DRAFT_VOCAB
    for key in (
        "fc.weight",
        "layers.0.self_attn.q_proj.weight",
        "layers.0.mlp.down_proj.weight",
        "norm.weight",
        "lm_head.weight",
    ):
        assert torch.equal(fresh.state_dict()[key], trained.state_dict()[key]), key


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: mla_draft(p), "speculators has no MLA draft layer"),
        (lambda p: specforge_draft(p, "Eagle3Qwen3ForCausalLM"), "Qwen3 layer"),
        (lambda p: speculators_draft(p, kind="peagle"), "parallel drafting"),
    ],
)
def test_formats_that_cannot_be_warm_started_say_why(tmp_path, kimi, make, why):
    from harness.draft.warm_start import check_init_from

    with pytest.raises(BadInput, match=f"cannot be warm-started: .*{why}"):
        check_init_from(make(tmp_path / "d"), kimi)
