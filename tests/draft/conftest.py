"""The draft tests' shared fixture."""

from __future__ import annotations

import pytest

from harness.verifier.layout import resolve_layout
from tests.synthetic import kimi_like


@pytest.fixture
def kimi(tmp_path):
    """A synthetic verifier's layout (tests/synthetic.py): the Kimi-K2.5 structure, tiny."""
    return resolve_layout(kimi_like(tmp_path / "verifier"))
