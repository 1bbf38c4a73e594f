"""The bench's engines: the factory that starts one of the recipe's kind (bench.engine: offline,
server, or an attached server), a (draft, k)'s speculative engine, and the machine clock
calibrated on a verifier's warm baseline engine (kept in the run and its manifest)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from harness.bench.clock import Clock, calibrate_clock
from harness.bench.manifest import update_manifest
from harness.bench.run_state import BenchRun, EngineFactory
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Engine
from harness.engine.environments import EngineEnv, adapt_plan
from harness.engine.settings import EnginePlan, SpeculativeSpec, engine_plan
from harness.recipe import Recipe
from harness.results.manifest import read_manifest_data
from harness.verifier.layout import VerifierLayout


def default_engine_factory(recipe: Recipe, run_dir: Path, env: EngineEnv | None = None) -> EngineFactory:
    """`env`: the vLLM installation server engines start from (harness/engine/environments.py; the
    canary's), recorded in the manifest as `engine_env`; None: this process's."""

    def make(plan: EnginePlan, name: str) -> Engine:
        kind = recipe.bench.engine
        if env is not None:
            plan = adapt_plan(plan, env)
            update_manifest(run_dir, engine_env=env.describe())
        if kind == "offline":
            from harness.engine.offline import OfflineEngine

            return OfflineEngine(
                plan,
                recipe.engine.startup_timeout_s,
                recipe.engine.request_timeout_s,
                log_path=run_dir / "logs" / f"{name}.log",
            )
        if kind == "server":
            from harness.engine.server import ServerEngine

            return ServerEngine(
                plan,
                run_dir / "logs" / f"{name}.log",
                recipe.engine.startup_timeout_s,
                recipe.engine.request_timeout_s,
                python=env.python if env is not None else None,
            )
        from harness.engine.server import AttachedEngine

        url = recipe.bench.baseline_url if plan.speculative is None else recipe.bench.url
        # the recipe checks that engine "attach" has both bench.url and bench.baseline_url
        return AttachedEngine(
            cast(str, url),
            request_timeout_s=recipe.engine.request_timeout_s,
            setting="bench.baseline_url" if plan.speculative is None else "bench.url",
        )

    return make


def start_spec_engine(run: BenchRun, layout: VerifierLayout, draft: DraftUnderTest, k: int) -> Engine:
    spec = SpeculativeSpec(draft.method, k, draft.path, run.recipe.bench.rejection_sample_method)
    return run.make_engine(engine_plan(run.recipe.engine, layout, spec), f"{draft.label}-k{k}")


def calibrate_verifier_clock(run: BenchRun, layout: VerifierLayout, base_engine: Engine) -> Clock | None:
    """The verifier's clock (calibrate_clock) on its warm baseline engine, kept in `run` and the manifest."""
    _, prompts = run.prompts[layout.path]
    clock = calibrate_clock(base_engine, next(iter(prompts.values())), run.recipe, run.quiet_drift)
    if clock is not None:
        run.clocks[layout.path] = clock
        noise = read_manifest_data(run.run_dir, missing_ok=True).get("machine_noise") or {}
        update_manifest(run.run_dir, machine_noise={**noise, Path(layout.path).name: round(clock.noise, 4)})
    return clock
