"""The headroom sweep's dry run prices it with the main job's cost model and its recipe's figures."""

from __future__ import annotations

import pytest

from harness.paths import REPO_ROOT
from harness.plan.dry_run import dry_run_plan
from harness.plan.headroom_plan import headroom_plan, headroom_work
from harness.recipe import load_recipe


def test_the_sweep_is_engine_starts_plus_its_tokens_at_the_decode_rate(tmp_path):
    recipe = load_recipe(REPO_ROOT / "train" / "tiny-kimi-plain.toml")
    work = headroom_work(recipe, engines=5, concurrencies=(1, 4), batches_per_load=8, num_prompts=4, max_tokens=24)
    assert work.engine_starts == 5 and work.tokens == 2 * 8 * 4 * 24
    assert [p.in_flight for p in work.parts] == [1, 4]  # a load above the batch's prompts: all of them at once
    cost = headroom_plan(recipe, tmp_path, work)
    figures = {f["key"]: f["value"] for f in dry_run_plan(recipe, tmp_path)["cost"]["assumptions"]}
    by_part = sum(p["wall_s"] for p in cost["parts"])
    assert by_part > 0 and cost["wall_s"] == pytest.approx(5 * figures["engine_start_s"] + by_part, abs=0.2)
    assert cost["gpu_h"] is None  # a CPU holds no GPU


def test_the_production_sweep_is_priced_in_gpu_hours(tmp_path):
    recipe = load_recipe(REPO_ROOT / "train" / "kimi-k2.5.toml")
    work = headroom_work(recipe, 13, (1, 8, 32, 64), 18, 8, 64)
    cost = headroom_plan(recipe, tmp_path, work)
    assert cost["gpus"] == 8 and cost["gpu_h"] == pytest.approx(8 * cost["wall_s"] / 3600, rel=0.01)
    assert cost["wall_h"] > 13 * 600 / 3600  # 13 engine starts of a 1 T-parameter model alone
