"""The fit guard (harness/draft/guard.py): a draft recorded for another verifier, by content or by
architecture, is refused."""

from __future__ import annotations

import json

import pytest

from harness.draft.guard import require_fit
from harness.errors import BadInput
from tests.draft_fixtures import (
    speculators_draft,
)


def test_recorded_verifier_content_must_match(tmp_path, kimi):
    d = speculators_draft(tmp_path / "d")
    (d / "harness.json").write_text(json.dumps({"verifier": {"name_or_path": "/v", "content_hash": {"sha256": "abc"}}}))
    with pytest.raises(BadInput, match="was trained for verifier /v .content abc."):
        require_fit(d, kimi)


def test_recorded_verifier_architectures_must_match(tmp_path, kimi):
    d = speculators_draft(tmp_path / "d", verifier_archs=("LlamaForCausalLM",))
    with pytest.raises(BadInput, match="trained for another verifier"):
        require_fit(d, kimi)
