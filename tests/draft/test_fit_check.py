"""A draft checked against a verifier before any engine starts (harness/draft/fit_check.py): each way a
draft does not fit is refused with its reason. Fast: tiny hand-written checkpoints (tests/draft_fixtures.py)."""

from __future__ import annotations

import json

import pytest

from harness.draft.fit_check import draft_problems
from harness.draft.formats import inspect_draft
from harness.draft.under_test import check_draft_for_verifier
from harness.errors import BadInput
from tests.draft_fixtures import (
    mla_draft,
    specforge_draft,
    speculators_draft,
)
from tests.synthetic import HIDDEN, LAYERS, VOCAB


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda p: speculators_draft(p, hidden=2 * HIDDEN), "draft hidden size 32 does not match the verifier's 16"),
        (
            lambda p: speculators_draft(p, shift=VOCAB),
            "d2t maps draft ids to verifier ids .* outside the verifier's vocabulary",
        ),
        (
            lambda p: speculators_draft(p, aux_ids=(1, 2, LAYERS)),
            r"aux layer ids \[1, 2, 4\] do not exist in a 4-layer verifier",
        ),
        (lambda p: specforge_draft(p, aux_ids=(1, 2, LAYERS + 3)), r"aux layer ids \[1, 2, 7\] do not exist"),
        (lambda p: speculators_draft(p, aux_ids=(0, 1, 2)), "aux layer id 0 .* crashes kimi_k2 verifiers"),
    ],
)
def test_a_draft_that_does_not_fit_is_refused_with_the_reason(tmp_path, kimi, make, reason):
    with pytest.raises(BadInput, match=reason):
        check_draft_for_verifier(make(tmp_path / "d"), kimi)


def test_fc_width_must_be_hidden_times_aux_states(tmp_path, kimi):
    d = specforge_draft(tmp_path / "d")
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 3]  # fc still reads 3 states
    (d / "config.json").write_text(json.dumps(cfg))
    assert (
        "fc weight [16, 48] reads 48 features but the verifier gives hidden 16 x 2 aux states = 32"
        in draft_problems(inspect_draft(d), kimi)[0]
    )


def test_mla_draft_with_deepseek_v3_model_type_is_refused_with_vllms_reason(tmp_path, kimi):
    d = mla_draft(tmp_path / "d")
    assert draft_problems(inspect_draft(d), kimi) == []
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "deepseek_v3"}))
    assert "Eagle3DeepSeekMTPModel" in draft_problems(inspect_draft(d), kimi)[-1]
