"""bench.engine_schedule = "one_at_a_time": one engine of a verifier up at a time, for a verifier
whose baseline and speculative engines do not fit the node together (Kimi-K2.5 at TP=8 on 8 GPUs).

Per verifier, in three phases (ABA at the engine level):
  A1  the baseline engine: warm-up, clock calibration and a sentinel (bench.machine_sentinel), the
      first ceil(R/2) repeats of every baseline arm the cells need (one per (suite, concurrency,
      temperature, request rate), shared by every draft and k as bench.shared_baseline shares
      them), a sentinel; closed.
  B   per (draft, k) with cells: its speculative engine, warm-up, a sentinel, every cell's
      speculative arm (all R repeats), a sentinel; closed. One start per engine configuration.
  A2  the baseline engine again: a sentinel, the rest of each baseline arm's repeats (at least one,
      so R = 1 has a baseline repeat on each side of B), a sentinel; then each cell is finished
      as the side-by-side schedule finishes it (T = 0 noise probe, T > 0 re-scoring: both need
      this engine) and written.
The baseline's repeats sit on both sides of B (half and half, to one repeat), so a machine drifting
steadily cancels in the speedup as A/B interleaving cancels it within a cell; no repeat of one arm
pairs with one of the other in time, so the speedup CI resamples each arm's repeats on its own
(harness/analysis/load.py, cell_rows(interleaved=False)). No baseline engine is up in
B, so each speculative engine times the sentinel itself; a cell's drift is the larger of the
baseline engine's spread (A1 to A2) and its own engine's (start to end) (MachineReading
speculative_own_engine). A change confined to B moves neither: the foreign-CPU share, read around
every arm as the other schedule reads it, is what catches a neighbour there.

What it costs: one more baseline engine start per verifier, baseline repeats on a machine minutes
apart from the speculative ones, and every speculative arm held in memory until A2.

Interrupted: cells are written only in A2, so a rerun (--resume) measures every unfinished cell
again, all three phases. The run's manifest records the schedule and each phase as it ran
(`engine_phases`: phase, engine, start and end times, what it measured).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.analysis.machine import MachineReading
from harness.bench.grid import CellSpec
from harness.bench.manifest import update_manifest
from harness.bench.placement import BaselineKey, baseline_key
from harness.bench.rows import ArmResult
from harness.cluster import baseline_repeats, engine_schedule, gpus_per_node, instance_gpus
from harness.engine.base import Engine
from harness.errors import BadInput
from harness.recipe import Recipe
from harness.results.manifest import read_manifest_data

EngineKey = tuple[str, int]  # (draft label, k): one speculative engine


def refuse_what_one_at_a_time_cannot_run(recipe: Recipe) -> None:
    """One BadInput line for a setting the one-at-a-time schedule cannot run, before any engine starts."""
    if engine_schedule(recipe) != "one_at_a_time":
        return
    b = recipe.bench
    if b.engine_schedule == "auto":
        why = (
            f'bench.engine_schedule = "auto" runs engines one at a time on this plan (a baseline and a speculative '
            f"engine of {instance_gpus(recipe.engine)} GPUs each do not fit a node of {gpus_per_node(recipe)})"
        )
        other = "on a node that holds both engines"
    else:
        why, other = 'bench.engine_schedule = "one_at_a_time"', 'or set bench.engine_schedule = "side_by_side"'
    if b.engine == "attach":
        raise BadInput(
            f'{why}, but bench.engine = "attach" starts no engine (both servers are up): set bench.engine = '
            f'"server", or bench.engine_schedule = "side_by_side" for the attached pair'
        )
    if b.dynamic_k:
        raise BadInput(
            f"{why}, which cannot run bench.dynamic_k (its schedule is derived from finished cells and measured "
            f"beside a live baseline engine): set bench.dynamic_k = false, {other}"
        )
    if not b.shared_baseline:
        raise BadInput(
            f"{why}, which cannot run bench.shared_baseline = false (a baseline arm beside every cell needs both "
            f"engines up): set bench.shared_baseline = true, {other}"
        )
    if b.race:
        raise BadInput(
            f"{why}, which cannot run bench.race (a raced setting draws its rounds with every arm's engine up "
            f"together): set bench.race = false, {other}"
        )
    if recipe.gate.max_prompts is not None:
        raise BadInput(
            f"{why}, which cannot run gate.max_prompts (a sequential paired cell draws its rounds with the "
            f"candidate's and the baseline draft's engines up together): unset gate.max_prompts, {other}"
        )


@dataclass(frozen=True)
class PhasePlan:
    """Which arm runs in which phase: A1 and A2 measure `baselines` (each with its first cell's
    inputs; that cell's id is the rows' baseline_cell), B runs `engines` in order."""

    baselines: dict[BaselineKey, CellSpec]
    engines: dict[EngineKey, list[CellSpec]]
    repeats: int  # bench.repeats: each speculative arm's, all in B
    baseline_repeats: tuple[int, int]  # each baseline arm's in A1 and in A2 (harness/cluster.py: the plan's too)

    @property
    def cells(self) -> list[CellSpec]:
        return [c for cells in self.engines.values() for c in cells]


def phase_plan(engines: dict[EngineKey, list[CellSpec]], repeats: int) -> PhasePlan:
    """`engines`: each speculative engine's cells, in the order they run."""
    baselines: dict[BaselineKey, CellSpec] = {}
    for cells in engines.values():
        for c in cells:
            baselines.setdefault(baseline_key(c), c)
    return PhasePlan(baselines, dict(engines), repeats, baseline_repeats(repeats))


class Steps(Protocol):
    """What the schedule asks of the bench (harness/bench/one_at_a_time_steps.py OneAtATimeSteps): how an engine
    starts and how an arm, a sentinel or a cell's rows are measured; this module says when."""

    run_dir: Path
    verifier: str  # the verifier's folder name, for the manifest
    quiet_drift: float | None  # this machine's quiet-rerun sentinel drift (analysis/machine.py), if recorded

    def start(self, engine: EngineKey | None, phase: str) -> Engine:
        """The baseline engine (None) or a speculative one, started and recorded, not warmed."""
        ...

    def warm_up(self, engine: Engine) -> None: ...

    def calibrate(self, engine: Engine) -> float | None:
        """The machine's steady noise on the warm baseline engine; None: bench.machine_sentinel off."""
        ...

    def sentinel(self, engine: Engine) -> float:
        """One run of the sentinel job on this engine: its tok/s."""
        ...

    def measure(self, engine: Engine, cell: CellSpec, arm: ArmResult, repeats: int) -> float:
        """`repeats` more repeats of the cell's arm on `engine`; the most foreign CPU share one saw."""
        ...

    def finish(
        self,
        cell: CellSpec,
        base_engine: Engine,
        arms: tuple[ArmResult, ArmResult],
        baseline_cell: str,
        machine: MachineReading | None,
    ) -> None:
        """The cell's rows from its two arms (the baseline engine is up), written."""
        ...


@dataclass
class _Readings:
    """The sentinels and foreign CPU shares a cell's MachineReading is built from (noise None: off)."""

    noise: float | None = None
    quiet_drift: float | None = None
    baseline: list[float] = field(default_factory=list)  # A1 start and end, A2 start and end
    engines: dict[EngineKey, list[float]] = field(default_factory=dict)  # each B engine's start and end
    base_cpu: dict[BaselineKey, float] = field(default_factory=dict)
    spec_cpu: dict[str, float] = field(default_factory=dict)  # by cell id

    def reading(self, cell: CellSpec) -> MachineReading | None:
        if self.noise is None:
            return None
        return MachineReading(
            tuple(self.baseline),
            tuple(self.engines.get((cell.draft, cell.k), ())),
            self.noise,
            foreign_cpu=max(self.base_cpu.get(baseline_key(cell), 0.0), self.spec_cpu.get(cell.id, 0.0)),
            speculative_own_engine=True,
            quiet_drift=self.quiet_drift,
        )


def bench_one_at_a_time(steps: Steps, plan: PhasePlan) -> None:
    """A1, B per speculative engine, A2 (module docstring); every cell written in A2."""
    readings = _Readings(quiet_drift=steps.quiet_drift)
    base = {key: ArmResult() for key in plan.baselines}
    spec: dict[str, ArmResult] = {}
    _baseline_phase(steps, plan, "A1", base, readings, spec)
    for key, cells in plan.engines.items():
        with _phase(steps, "B", key, [c.id for c in cells]), steps.start(key, "B") as engine:
            steps.warm_up(engine)
            sentinels = readings.engines.setdefault(key, [])
            _sentinel(steps, engine, readings, sentinels)
            for cell in cells:
                spec[cell.id] = ArmResult()
                readings.spec_cpu[cell.id] = steps.measure(engine, cell, spec[cell.id], plan.repeats)
            _sentinel(steps, engine, readings, sentinels)
    _baseline_phase(steps, plan, "A2", base, readings, spec)


def _baseline_phase(
    steps: Steps,
    plan: PhasePlan,
    phase: str,
    base: dict[BaselineKey, ArmResult],
    readings: _Readings,
    spec: dict[str, ArmResult],
) -> None:
    """A1 (calibrates the clock) or A2 (then finishes and writes every cell: `spec` holds their arms)."""
    repeats = plan.baseline_repeats[0 if phase == "A1" else 1]
    with _phase(steps, phase, None, [c.id for c in plan.baselines.values()]), steps.start(None, phase) as engine:
        steps.warm_up(engine)
        if phase == "A1":
            readings.noise = steps.calibrate(engine)
        _sentinel(steps, engine, readings, readings.baseline)
        for key, cell in plan.baselines.items():
            cpu = steps.measure(engine, cell, base[key], repeats)
            readings.base_cpu[key] = max(readings.base_cpu.get(key, 0.0), cpu)
        _sentinel(steps, engine, readings, readings.baseline)
        for cell in plan.cells if phase == "A2" else []:
            key = baseline_key(cell)
            steps.finish(cell, engine, (base[key], spec[cell.id]), plan.baselines[key].id, readings.reading(cell))


def _sentinel(steps: Steps, engine: Engine, readings: _Readings, into: list[float]) -> None:
    if readings.noise is not None:
        into.append(steps.sentinel(engine))


@contextlib.contextmanager
def _phase(steps: Steps, phase: str, engine: EngineKey | None, measured: list[str]) -> Iterator[None]:
    """The phase in the manifest's `engine_phases` (`arms`: the cells whose arm it measured), its end
    time written once its engine is closed (none: the phase did not finish)."""
    name = "baseline" if engine is None else f"{engine[0]}-k{engine[1]}"
    entry = {"verifier": steps.verifier, "phase": phase, "engine": name, "arms": measured, "started_at": _now()}
    phases = read_manifest_data(steps.run_dir, missing_ok=True).get("engine_phases") or []
    update_manifest(steps.run_dir, engine_phases=[*phases, entry])
    index = len(phases)
    yield
    phases = read_manifest_data(steps.run_dir, missing_ok=True)["engine_phases"]
    phases[index]["ended_at"] = _now()
    update_manifest(steps.run_dir, engine_phases=phases)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
