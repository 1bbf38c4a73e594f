"""The hardware a plan runs on ([cluster] in a recipe), resolved with the device's defaults, and
what it decides: whether a verifier's baseline and speculative engines can be up at once.

Pure: values in, values out. The dry run (harness/plan/dry_run.py) checks the plan against it; the
bench (harness/bench/loop.py) asks `engine_schedule` how to order its engines.
"""

from __future__ import annotations

from typing import Literal

from harness.recipe import EngineSettings, Recipe

H200_GIB = 141.0  # NVIDIA H200 datasheet: 141 GB HBM3e per GPU
GPUS_PER_GPU_NODE = 8  # an HGX node: the 8 GPUs Kimi-K2.5's deployment takes (docs/facts.md §1)

Schedule = Literal["side_by_side", "one_at_a_time"]


def instance_gpus(engine: EngineSettings) -> int:
    """GPUs one serving instance holds (tensor x pipeline parallel ranks); none on a CPU."""
    return engine.tensor_parallel_size * engine.pipeline_parallel_size if engine.device == "cuda" else 0


def gpus_per_node(recipe: Recipe) -> int:
    c = recipe.cluster
    if c.gpus_per_node is not None:
        return c.gpus_per_node
    return GPUS_PER_GPU_NODE if recipe.engine.device == "cuda" else 0


def gpu_memory_gib(recipe: Recipe) -> float | None:
    c = recipe.cluster
    if c.gpu_memory_gib is not None:
        return c.gpu_memory_gib
    return H200_GIB if recipe.engine.device == "cuda" else None


def engines_fit_side_by_side(recipe: Recipe) -> bool:
    """Both engines of a cell up at once on the node the harness runs on (it starts its engines there):
    two serving instances' GPUs within one node's. Always on a CPU (engines share its cores)."""
    gpus = instance_gpus(recipe.engine)
    return gpus == 0 or 2 * gpus <= gpus_per_node(recipe)


def engine_schedule(recipe: Recipe) -> Schedule:
    """bench.engine_schedule resolved: 'auto' runs engines one at a time where they do not fit side by side."""
    s = recipe.bench.engine_schedule
    if s != "auto":
        return s
    return "side_by_side" if engines_fit_side_by_side(recipe) else "one_at_a_time"


def baseline_repeats(repeats: int) -> tuple[int, int]:
    """One engine at a time: the baseline arm's repeats before and after the speculative engines (ABA).
    The first half before, the rest after, at least one on each side so the pair is centred in time."""
    first = (repeats + 1) // 2
    return first, max(1, repeats - first)


def extraction_engine(recipe: Recipe) -> EngineSettings:
    """The engine settings of the hidden-state extraction server: the recipe's, except that during
    online training on GPUs it takes train.extraction_gpu_memory_utilization of each GPU, leaving the
    rest to the draft's training on the same GPUs."""
    e, t = recipe.engine, recipe.train
    if t.extraction_gpu_memory_utilization and e.device == "cuda" and t.hidden_states_mode == "online":
        return e.model_copy(update={"gpu_memory_utilization": t.extraction_gpu_memory_utilization})
    return e
