"""What every step of one bench run shares: the recipe, the run folder, the engine factory, the
suites and their rendered prompts, and what the run learns as its cells go (shared baseline arms,
the baseline engine's numeric noise, each verifier's machine clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bench.clock import Clock
from harness.bench.machine_record import MachineRecord
from harness.bench.planning import Prompts
from harness.bench.rows import ArmResult
from harness.engine.base import Engine
from harness.engine.settings import EnginePlan
from harness.recipe import Recipe
from harness.schema import CellRow
from harness.suites import Suite
from harness.ui import Reporter

EngineFactory = Callable[[EnginePlan, str], Engine]


@dataclass(frozen=True)
class SharedBaseline:
    """A measured baseline arm, the cell it was measured in, and the machine sentinels around it."""

    arm: ArmResult
    cell_id: str
    sentinels: tuple[float, ...] = ()
    foreign_cpu: float = 0.0  # the share of the machine's CPUs other processes used while it ran


@dataclass(frozen=True)
class BenchRun:
    """What every step of one bench run needs (built once by `run_bench`)."""

    recipe: Recipe
    run_dir: Path
    reporter: Reporter
    make_engine: EngineFactory
    suites: dict[str, Suite]
    verifier_hash: dict[str, str]
    # The baseline engine's numeric noise per (verifier, suite, concurrency): a property of the
    # engine, prompts and batch shape, not of the draft, so measured once and shared by cells.
    noise_nats: dict[tuple[str, str, int], float | None] = field(default_factory=dict)
    # The baseline arm per (verifier, suite, concurrency, temperature, request rate) and the cell it was
    # measured in, when bench.shared_baseline: every draft and k of the run pairs with it.
    baselines: dict[tuple[str, str, int, float, float], SharedBaseline] = field(default_factory=dict)
    # per verifier path: the machine's sentinel job and calibrated noise (bench.machine_sentinel)
    clocks: dict[str, Clock] = field(default_factory=dict)
    # per verifier path: its tokenizer and every suite's rendered prompts (render_all: checked
    # against the context before any engine starts or any file is written)
    prompts: dict[str, tuple[Any, dict[str, Prompts]]] = field(default_factory=dict)
    run_id: str = ""  # the rows' run id when it is not the folder's: a shard's names its run (bench/shards.py)
    # every finished cell's rows: a resumed run's read once at its start, then each cell's as it is
    # recorded (record_cell); the dynamic-k arm derives its schedule from them
    rows: list[CellRow] = field(default_factory=list)
    # this machine's measured between-run SD of a speedup (harness/bench/machine_record.py), None if unmeasured
    between_runs: MachineRecord | None = None

    @property
    def quiet_drift(self) -> float | None:
        """This machine's recorded sentinel drift on quiet reruns: the floor of the drift tolerance."""
        return self.between_runs.sentinel_quiet_drift if self.between_runs else None
