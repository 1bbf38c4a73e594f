"""One verifier's engines, arms, sentinels and rows as the one-at-a-time schedule asks for them
(harness/bench/one_at_a_time.py `Steps`): the same pieces the side-by-side loop uses."""

from __future__ import annotations

from pathlib import Path

from harness.analysis.machine import MachineReading
from harness.bench.arm import warm_up
from harness.bench.cell import MeasuredArms, arm_inputs, finish_cell, record_cell, timed_arm
from harness.bench.clock import sentinel_tok_s
from harness.bench.engines import calibrate_verifier_clock, start_spec_engine
from harness.bench.grid import CellSpec
from harness.bench.manifest import record_engine
from harness.bench.one_at_a_time import EngineKey
from harness.bench.rows import ArmResult
from harness.bench.run_state import BenchRun
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Engine
from harness.engine.settings import engine_plan
from harness.verifier.layout import VerifierLayout


class OneAtATimeSteps:
    """One verifier's engines, arms, sentinels and rows as the one-at-a-time schedule asks for them
    (harness/bench/one_at_a_time.py Steps): the same pieces the side-by-side loop uses."""

    def __init__(self, run: BenchRun, layout: VerifierLayout, drafts: list[DraftUnderTest]):
        self.run, self.layout, self.drafts = run, layout, {d.label: d for d in drafts}
        self.run_dir, self.verifier = run.run_dir, Path(layout.path).name
        self.tokenizer, self.prompts = run.prompts[layout.path]
        self.quiet_drift = run.quiet_drift

    def start(self, engine: EngineKey | None, phase: str) -> Engine:
        if engine is None:  # the second baseline start gets a log and a manifest entry of its own
            name = "baseline" if phase == "A1" else f"baseline-{phase.lower()}"
            started = self.run.make_engine(engine_plan(self.run.recipe.engine, self.layout), f"{name}-{self.verifier}")
        else:
            name = f"{engine[0]}-k{engine[1]}"
            started = start_spec_engine(self.run, self.layout, self.drafts[engine[0]], engine[1])
        try:
            record_engine(self.run_dir, name, started)
        except BaseException:
            started.close()
            raise
        return started

    def warm_up(self, engine: Engine) -> None:
        warm_up(engine, next(iter(self.prompts.values())), self.run.recipe, self.layout)

    def calibrate(self, engine: Engine) -> float | None:
        clock = calibrate_verifier_clock(self.run, self.layout, engine)
        return None if clock is None else clock.noise

    def sentinel(self, engine: Engine) -> float:
        return sentinel_tok_s(engine, self.run.clocks[self.layout.path])

    def measure(self, engine: Engine, cell: CellSpec, arm: ArmResult, repeats: int) -> float:
        inputs = arm_inputs(self.run, cell, self.layout, self.tokenizer, self.prompts[cell.suite])
        cpu = self.layout.path in self.run.clocks
        return max((timed_arm(self.run, engine, cell, inputs, arm, cpu) for _ in range(repeats)), default=0.0)

    def finish(
        self,
        cell: CellSpec,
        base_engine: Engine,
        arms: tuple[ArmResult, ArmResult],
        baseline_cell: str,
        machine: MachineReading | None,
    ) -> None:
        inputs = arm_inputs(self.run, cell, self.layout, self.tokenizer, self.prompts[cell.suite])
        measured = MeasuredArms(arms[0], arms[1], baseline_cell, machine, interleaved=False)
        record_cell(
            self.run,
            cell,
            finish_cell(self.run, cell, self.drafts[cell.draft], base_engine, base_engine.kind, inputs, measured),
        )
