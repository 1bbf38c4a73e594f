"""The dry run of `harness headroom` (issue 53): the sweep's engine starts, tokens, wall hours and
GPU-hours, priced by the main job's cost model (harness/plan/cost.py) with the figures the recipe's own
dry run uses for its verifier (the device's defaults, scaled to the verifier's size on a CPU, under the
recipe's [cost]). Nothing is built or started.

Each speculative batch is paired with a baseline batch of the same requests; every batch is priced at
the no-speculation decode rate for its requests in flight, an upper bound on time (a draft that is
accepted decodes its batch in fewer steps)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.plan.cost import MODEL, stage_costs
from harness.plan.figures import by_key, figures_from
from harness.plan.stages import Part, StageWork, serving_gpus
from harness.recipe import Recipe


def headroom_work(
    recipe: Recipe,
    engines: int,
    concurrencies: Sequence[int],
    batches_per_load: int,
    num_prompts: int,
    max_tokens: int,
) -> StageWork:
    """The sweep as a stage: `engines` starts, per load `batches_per_load` batches of `num_prompts`
    requests x `max_tokens` forced tokens, min(load, prompts) in flight."""
    parts = tuple(
        Part(batches_per_load * num_prompts * max_tokens, min(c, num_prompts), f"concurrency {c}")
        for c in concurrencies
    )
    batches = batches_per_load * len(concurrencies)
    work = f"{engines} engines, {batches} batches of {num_prompts} requests x {max_tokens} tokens"
    return StageWork("headroom sweep", work, "generate_tok_s", parts, engines, serving_gpus(recipe.engine))


def headroom_plan(recipe: Recipe, run_dir: Path, work: StageWork) -> dict[str, Any]:
    """The sweep's cost with the recipe's dry-run figures; its wall in seconds and hours, GPU-hours."""
    from harness.plan.dry_run import dry_run_plan

    figures = figures_from(dry_run_plan(recipe, run_dir)["cost"])
    [cost] = stage_costs([work], by_key(figures))
    return {**cost.to_dict(), "model": MODEL, "priced_at": "the no-speculation decode rate (an upper bound)"}
