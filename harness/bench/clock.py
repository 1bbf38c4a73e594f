"""The machine's clock (bench.machine_sentinel, harness/analysis/machine.py): a short fixed job,
the sentinel, timed on a warm engine. Its spread over a few calibration runs is the machine's
steady noise; readings around each arm say whether the machine's speed moved while a cell ran."""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.analysis.machine import spread
from harness.bench.planning import Prompts
from harness.engine.base import Engine, GenRequest, Sampling
from harness.recipe import Recipe


@dataclass(frozen=True)
class Clock:
    """The sentinel job timed on the baseline engine (harness/analysis/machine.py) and the spread
    of its calibration runs."""

    requests: tuple[GenRequest, ...]
    sampling: Sampling
    noise: float
    quiet_drift: float | None = None  # this machine's quiet-rerun sentinel drift (analysis/machine.py)


def sentinel_tok_s(engine: Engine, clock: Clock) -> float:
    """One run of the sentinel job: its output tok/s (the machine's speed index now)."""
    res = engine.generate(list(clock.requests), clock.sampling, len(clock.requests))
    if res.wall_s <= 0 or not all(o.ok for o in res.outputs):
        return 0.0  # no reading (spread ignores it); a failing engine fails the cell's own arms
    return res.num_output_tokens / res.wall_s


def calibrate_clock(engine: Engine, prompts: Prompts, recipe: Recipe, quiet_drift: float | None = None) -> Clock | None:
    """The sentinel job (the first prompts, greedy, a fixed length) and the machine's noise: the
    spread of a few runs back to back on the warm baseline engine. None when bench.machine_sentinel
    is off. `quiet_drift`: this machine's record, the floor of every cell's drift tolerance."""
    from harness.analysis import machine

    if not recipe.bench.machine_sentinel:
        return None
    reqs = tuple(
        GenRequest(f"sentinel-{i}", tuple(ids), machine.sentinel_tokens(recipe.bench.max_tokens))
        for i, (_, ids) in enumerate(prompts[: machine.SENTINEL_PROMPTS])
    )
    clock = Clock(reqs, Sampling(temperature=0.0, seed=recipe.engine.seed, ignore_eos=True), 0.0, quiet_drift)
    speeds = [sentinel_tok_s(engine, clock) for _ in range(machine.CALIBRATION_RUNS)]
    return replace(clock, noise=spread(speeds))
