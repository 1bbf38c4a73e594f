"""What every design that draws a suite's prompts in rounds shares (a sequential paired cell,
harness/bench/sequential.py; a raced answer table, harness/bench/race.py): the seeded order the
rounds draw prompts in, the arms' order rotated from one repeat to the next, and the arms as the
rounds fill them, with the machine around each (cell.ArmSentinels, as a cell's two arms keep it).

Each arm accumulates over the rounds: a round's repeat is one of the arm's repeats (a RepeatRecord),
paired in time with the baseline arm's, so the speedup's bootstrap resamples rounds, then their
requests (harness/analysis/load.py)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.analysis.machine import MachineReading
from harness.bench.cell import ArmInputs, ArmSentinels
from harness.bench.clock import Clock
from harness.bench.grid import CellSpec
from harness.bench.rows import ArmResult
from harness.bench.run_state import BenchRun
from harness.engine.base import Engine

BASELINE = "baseline"


def draw_order(n: int, seed: int) -> list[int]:
    """The order rounds draw a cell's `n` prompts in: a seeded permutation (a suite file's own order
    groups its topics, and the first rounds should stand for the whole suite)."""
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def rotated(names: tuple[str, ...], turn: int) -> tuple[str, ...]:
    """The arms' order at this turn (one turn per repeat of a round): rotated each turn, so the machine's
    drift falls on every arm alike."""
    if not names:
        return names
    i = turn % len(names)
    return names[i:] + names[:i]


class RoundArms:
    """Arms by name on their engines (the baseline arm is BASELINE, on the baseline engine), as the
    rounds fill them, with the machine around each."""

    def __init__(self, run: BenchRun, cell: CellSpec, engines: Mapping[str, Engine], clock: Clock | None):
        self.engines, self.clock = dict(engines), clock
        self.arms = {name: ArmResult() for name in self.engines}
        self.sentinels = ArmSentinels(run, cell, self.engines[BASELINE], clock, tuple(self.engines))

    def measure(self, which: str, inputs: ArmInputs, repeat: int) -> None:
        self.sentinels.measure(which, self.engines[which], inputs, self.arms[which], repeat)

    def reading(self, which: str) -> MachineReading | None:
        """The machine around the baseline arm and `which` speculative arm, as one cell sees it."""
        if self.clock is None:
            return None
        brackets, foreign = self.sentinels.brackets, self.sentinels.foreign
        return MachineReading(
            tuple(brackets[BASELINE]),
            tuple(brackets[which]),
            self.clock.noise,
            foreign_cpu=max(foreign[BASELINE], foreign[which]),
            quiet_drift=self.clock.quiet_drift,
        )
