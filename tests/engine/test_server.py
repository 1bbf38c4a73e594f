"""Server engines (harness/engine/server.py): an attached server that does not answer names the
recipe setting it came from."""

from __future__ import annotations

import pytest

from harness.errors import InfraError


def test_attach_error_names_the_recipe_settings():
    from harness.engine.server import AttachedEngine, free_port

    for setting in ("bench.url", "bench.baseline_url"):  # the one the failing server came from
        with pytest.raises(InfraError) as e:
            AttachedEngine(f"http://127.0.0.1:{free_port()}", setting=setting)
        assert f"check {setting} in the recipe" in e.value.message
