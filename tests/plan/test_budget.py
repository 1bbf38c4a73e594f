"""--budget-gpu-hours / --budget-hours: the bench's levers in order, only while over budget, each said
as the --set that makes it; and the precision the plan states for what is left."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.paths import REPO_ROOT
from harness.plan.bench_precision import by_concurrency
from harness.plan.budget import fit_budget
from harness.recipe import load_recipe

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"
# the production matrix as it was before it was sized: every k its own engine, 3 repeats, 80 prompts
UNSIZED = [
    "bench.repeats=3",
    "bench.k_from_one_engine=false",
    "bench.k_measured=[]",
    "bench.max_prompts_by_concurrency={}",
]


def _cost(recipe):
    """A stand-in price: arms x prompts x engines, enough to order the levers (the CLI uses the dry run's)."""
    b = recipe.bench
    prompts = sum(b.prompts_at(c, b.num_prompts or 80) / c for c in b.concurrency)
    return {"total": {"gpu_h": len(b.engine_ks) * b.repeats * prompts}}


def test_levers_apply_in_order_and_stop_when_it_fits():
    r = load_recipe(KIMI, UNSIZED)
    start = _cost(r)["total"]["gpu_h"]
    fit = fit_budget(r, start / 3, _cost, "gpu_h", 80)
    assert fit.fits and fit.total <= start / 3
    assert [s.setting for s in fit.steps] == ["bench.repeats=1"]
    deeper = fit_budget(r, start / 20, _cost, "gpu_h", 80)
    assert [s.setting for s in deeper.steps][:2] == [
        "bench.repeats=1",
        "bench.k_from_one_engine=true bench.k_measured=[3]",
    ]
    assert deeper.recipe.bench.engine_ks == [3, 8] and deeper.recipe.bench.max_prompts_by_concurrency[1] < 80
    assert all(a.total >= b.total for a, b in zip(deeper.steps, deeper.steps[1:], strict=False))


def test_a_budget_met_already_changes_nothing():
    r = load_recipe(KIMI, UNSIZED)
    fit = fit_budget(r, 1e9, _cost, "gpu_h", 80)
    assert fit.fits and fit.steps == () and fit.recipe == r


def test_an_impossible_budget_says_so():
    fit = fit_budget(load_recipe(KIMI, UNSIZED), 1e-6, _cost, "gpu_h", 80)
    assert not fit.fits and fit.recipe.bench.num_prompts == 10  # halved down to the floor of 8 prompts and no lower


def test_precision_follows_the_requests_each_cell_sends():
    r = load_recipe(KIMI, [])
    per_c = by_concurrency(r, 80)
    assert per_c[1]["requests_per_arm"] == 16 and per_c[8]["requests_per_arm"] == 80
    # AL half-width 1.96 x 0.16 / sqrt(n)
    assert per_c[1]["al_ci_half_width"] == pytest.approx(1.96 * 0.16 / 4, abs=1e-3)
    assert per_c[8]["speedup_ci_half_width_pct"] < per_c[1]["speedup_ci_half_width_pct"]


def test_cli_fits_the_unsized_production_plan_to_a_budget():
    args = ["train-and-bench", str(KIMI), "--dry-run", "--json"]
    for s in UNSIZED:
        args += ["--set", s]
    p = subprocess.run(
        [sys.executable, "-m", "harness", *args, "--budget-gpu-hours", "600"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["budget"]["fits"] and plan["cost"]["total"]["gpu_h"] <= 600
    assert plan["budget"]["changes"][0]["set"] == "bench.repeats=1"
    # a budget the plan cannot reach is refused in one line, exit 2 (the CPU demo: no lever applies to it)
    too_small = subprocess.run(
        [sys.executable, "-m", "harness", "train-and-bench", "--dry-run", "--budget-hours", "0.0001"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert too_small.returncode == 2 and "cannot fit 0.0001 hours" in too_small.stderr
