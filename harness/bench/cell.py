"""One cell: its two arms measured on their engines, A/B interleaved over the repeats (or only the
speculative arm beside a shared baseline arm, bench.shared_baseline), with the machine's sentinels
and foreign CPU read around each; then its rows (the T = 0 noise probe and the T > 0 re-scoring
on the baseline engine, harness/bench/rows.py cell_rows), written as the cell's file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness import interrupts
from harness.analysis import slo
from harness.analysis.machine import FOREIGN_CPU_LIMIT, MachineReading, foreign_cpu, spread, tolerance
from harness.bench.arm import run_arm, sampling_for
from harness.bench.clock import Clock, sentinel_tok_s
from harness.bench.cpu_ticks import read_ticks
from harness.bench.grid import CellSpec
from harness.bench.lossless_probes import engine_noise, rescored_arms
from harness.bench.machine_record import widen_row
from harness.bench.planning import Prompts, random_suite_flag
from harness.bench.rows import ArmResult, CellIdentity, CellRow, cell_rows
from harness.bench.run_state import BenchRun, SharedBaseline
from harness.cluster import engine_schedule
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Arrivals, Engine, Sampling
from harness.prompts import end_think_token
from harness.results.table import write_cell
from harness.suites import Suite
from harness.verifier.layout import VerifierLayout


@dataclass(frozen=True)
class ArmInputs:
    """What both arms of a cell run on: the verifier's tokenizer, the suite's rendered prompts,
    the cell's sampling settings and the longest prompt a later turn may grow to
    (engine.max_model_len - bench.max_tokens)."""

    tokenizer: Any
    prompts: Prompts
    sampling: Sampling
    max_prompt: int
    fresh_prefix: bool = False  # a fresh cache salt per request: prefix caching off (Suite.prefix_caching)


@dataclass(frozen=True)
class MeasuredArms:
    """A cell's two arms (_measure_arms): the baseline arm (measured here or shared, see
    bench.shared_baseline), the speculative arm, the id of the cell that measured the baseline,
    and the machine sentinels around them (None when bench.machine_sentinel is off)."""

    baseline: ArmResult
    speculative: ArmResult
    baseline_cell: str
    machine: MachineReading | None
    interleaved: bool = True  # repeats ran A/B in turn; not with engines one at a time (speedup CI unpaired)


@dataclass(frozen=True)
class MeasuredCell:
    """A measured cell (measure_cell): its (baseline, speculative) rows, and its per-request
    records by arm ({"baseline": [...], "speculative": [...]}, the side file beside the cell)."""

    rows: tuple[CellRow, CellRow]
    requests: dict[str, list[dict]]


def arm_inputs(run: BenchRun, cell: CellSpec, layout: VerifierLayout, tokenizer, prompts: Prompts) -> ArmInputs:
    """What both arms of the cell run on: its suite's first prompts (all, or bench.max_prompts_by_concurrency
    at the cell's concurrency), sampling and the longest prompt a later turn may grow to."""
    b = run.recipe.bench
    max_prompt = run.recipe.engine.max_model_len - b.max_tokens
    sampling = sampling_for(run.recipe, cell.temperature, layout)
    prompts = prompts[: b.prompts_at(cell.concurrency, len(prompts))]
    return ArmInputs(tokenizer, prompts, sampling, max_prompt, not run.suites[cell.suite].prefix_caching)


def measure_cell(
    run: BenchRun, cell: CellSpec, draft: DraftUnderTest, engines: tuple[Engine, Engine], tokenizer, prompts: Prompts
) -> MeasuredCell:
    """Both arms of a cell (_measure_arms): the cell's two rows, and its per-request records by
    arm (the side file beside the cell)."""
    inputs = arm_inputs(run, cell, draft.verifier, tokenizer, prompts)
    arms = _measure_arms(run, cell, draft, engines, inputs)
    return finish_cell(run, cell, draft, engines[0], engines[1].kind, inputs, arms)


def finish_cell(
    run: BenchRun,
    cell: CellSpec,
    draft: DraftUnderTest,
    base_engine: Engine,
    engine_kind: str,
    inputs: ArmInputs,
    arms: MeasuredArms,
) -> MeasuredCell:
    """A cell's rows from its measured arms, whichever schedule measured them: the T = 0 noise probe
    and the T > 0 re-scoring run on the baseline engine (up when this is called), then cell_rows."""
    b = run.recipe.bench
    tokenizer, prompts, sampling, max_prompt = inputs.tokenizer, inputs.prompts, inputs.sampling, inputs.max_prompt
    barm, sarm = arms.baseline, arms.speculative
    missed = cell.temperature == 0 and any(sarm.outputs.get(k) != v for k, v in barm.outputs.items())
    key = (draft.verifier.path, cell.suite, cell.concurrency)
    if missed and key not in run.noise_nats:
        run.noise_nats[key] = engine_noise(
            base_engine, tokenizer, prompts, sampling, b.max_tokens, cell.concurrency, max_prompt, barm
        )
    noise = run.noise_nats.get(key) if missed else None
    samples = (
        rescored_arms(base_engine, prompts, (barm, sarm), sampling, b.lossless_logprobs)
        if cell.temperature > 0
        else None
    )
    rows = cell_rows(
        cell_identity(run, cell, draft, engine_kind),
        barm,
        sarm,
        predicted_al=draft.predicted_al(cell.k),
        deterministic_verifier=draft.deterministic_verifier,
        mismatch_tolerance=b.mismatch_tolerance,
        train_context_len=draft.train_context_len,
        end_think_id=end_think_id(tokenizer, run.suites[cell.suite]),
        noise_nats=noise,
        num_top_logprobs=b.lossless_logprobs,
        sampling_samples=samples,
        machine=arms.machine,
        k_sweep=b.k_from_one_engine and cell.k == max(b.k),
        ignore_eos=b.ignore_eos,
        random_prompts=random_suite_flag(tokenizer, prompts) if b.allow_random_prompts else None,
        slo_bounds=slo.bounds_s(b.slo.model_dump()) if b.slo else None,
        interleaved=arms.interleaved,
    )
    for r in rows:
        r.baseline_cell, r.engine_schedule = arms.baseline_cell, engine_schedule(run.recipe)
    widen_row(rows[1], run.between_runs)  # what a rerun on this machine would add
    return MeasuredCell(
        rows, {"baseline": [r.to_dict() for r in barm.requests], "speculative": [r.to_dict() for r in sarm.requests]}
    )


class ArmSentinels:
    """The machine around a cell's arms: the sentinel job timed on the baseline engine before the first
    run and after every run (`timeline`), the two readings around each arm's runs (`brackets`, by arm
    name), and the most CPU other processes took while each arm ran (`foreign`)."""

    def __init__(
        self, run: BenchRun, cell: CellSpec, base_engine: Engine, clock: Clock | None, names: tuple[str, ...]
    ) -> None:
        self.run, self.cell, self.base_engine, self.clock = run, cell, base_engine, clock
        self.timeline = [sentinel_tok_s(base_engine, clock)] if clock else []
        self.brackets: dict[str, list[float]] = {n: [] for n in names}
        self.foreign: dict[str, float] = dict.fromkeys(names, 0.0)

    def measure(self, which: str, engine: Engine, inputs: ArmInputs, arm: ArmResult, repeat: int | None = None) -> None:
        """One repeat of `arm` on `engine` (timed_arm), with the sentinel after it."""
        cpu = timed_arm(self.run, engine, self.cell, inputs, arm, self.clock is not None, repeat)
        if self.clock:  # the sentinels before and after this arm, and the CPU others took while it ran
            self.foreign[which] = max(self.foreign[which], cpu)
            self.timeline.append(sentinel_tok_s(self.base_engine, self.clock))
            self.brackets[which] += self.timeline[-2:]


def _measure_arms(
    run: BenchRun, cell: CellSpec, draft: DraftUnderTest, engines: tuple[Engine, Engine], inputs: ArmInputs
) -> MeasuredArms:
    """The cell's (baseline, speculative) arms, the id of the cell that measured the baseline, and
    the machine sentinels around them. Both arms are measured here, A/B interleaved over the
    repeats (the order alternates so drift cancels), unless bench.shared_baseline holds an arm for
    this (verifier, suite, concurrency, temperature): then only the speculative arm, and the
    baseline again beside it when the sentinels say the machine's speed moved since it was measured."""
    b = run.recipe.bench
    key = (draft.verifier.path, cell.suite, cell.concurrency, cell.temperature, cell.request_rate)
    clock = run.clocks.get(draft.verifier.path)
    rec = ArmSentinels(run, cell, engines[0], clock, ("baseline", "speculative"))
    brackets, foreign, timeline = rec.brackets, rec.foreign, rec.timeline

    def measure(which: str, arm: ArmResult) -> None:
        rec.measure(which, engines[0] if which == "baseline" else engines[1], inputs, arm)

    measured = run.baselines.get(key) if b.shared_baseline else None
    barm, sarm = measured.arm if measured else ArmResult(), ArmResult()
    for r in range(b.repeats):
        order = [("baseline", barm), ("speculative", sarm)][1 if measured else 0 :]
        for which, arm in order[::-1] if r % 2 else order:
            measure(which, arm)
    remeasured = False
    if measured:
        foreign["baseline"] = measured.foreign_cpu
    if (
        measured
        and clock
        and (
            spread(measured.sentinels + tuple(timeline)) > tolerance(clock.noise, clock.quiet_drift)
            or max(foreign.values()) > FOREIGN_CPU_LIMIT
        )
    ):
        barm, remeasured = ArmResult(), True  # the machine changed since: pair this arm in time
        foreign["baseline"] = 0.0
        for _ in range(b.repeats):
            measure("baseline", barm)
        measured = None
    if measured is None and b.shared_baseline:
        run.baselines[key] = SharedBaseline(barm, cell.id, tuple(brackets["baseline"]), foreign["baseline"])
    reading = (
        None
        if clock is None
        else MachineReading(
            measured.sentinels if measured else tuple(brackets["baseline"]),
            tuple(brackets["speculative"]),
            clock.noise,
            remeasured,
            max(foreign.values()),
            quiet_drift=clock.quiet_drift,
        )
    )
    return MeasuredArms(barm, sarm, measured.cell_id if measured else cell.id, reading)


def timed_arm(
    run: BenchRun,
    engine: Engine,
    cell: CellSpec,
    inputs: ArmInputs,
    arm: ArmResult,
    cpu: bool,
    repeat: int | None = None,
) -> float:
    """One repeat of the cell's arm on `engine` (`repeat`: its index, run_arm); with `cpu`, the share of
    the machine's CPUs that other processes used while it ran (0 without)."""
    b = run.recipe.bench
    interrupts.check()  # a safe point: SIGTERM stops the run here even if its exception was lost
    before = read_ticks() if cpu else None
    run_arm(
        engine,
        inputs.tokenizer,
        inputs.prompts,
        inputs.sampling,
        b.max_tokens,
        cell.concurrency,
        inputs.max_prompt,
        arm,
        Arrivals(cell.request_rate, b.burstiness, b.arrival_seed) if cell.request_rate else None,
        inputs.fresh_prefix,
        repeat,
    )
    after = read_ticks() if before is not None else None
    return foreign_cpu(before, after) if before is not None and after is not None else 0.0


def cell_identity(run: BenchRun, cell: CellSpec, draft: DraftUnderTest, engine_kind: str) -> CellIdentity:
    b, suite = run.recipe.bench, run.suites[cell.suite]
    return CellIdentity(
        run_id=run.run_id or run.run_dir.name,
        cell_id=cell.id,
        draft=draft.label,
        method=draft.method,
        suite=suite.name,
        suite_version=suite.version,
        suite_sha=suite.sha,
        k=cell.k,
        concurrency=cell.concurrency,
        temperature=cell.temperature,
        request_rate=cell.request_rate,
        top_p=b.top_p,
        max_tokens=b.max_tokens,
        repeats=b.repeats,
        engine=engine_kind,
        rejection_sample_method=b.rejection_sample_method if cell.temperature > 0 else "greedy",
        verifier_hash=run.verifier_hash[draft.verifier.path],
        draft_hash=(draft.content_hash or {}).get("sha256"),
    )


def end_think_id(tokenizer, suite: Suite | None = None) -> int | None:
    """The `</think>` token id when the tokenizer has one as a single token (thinking split); None
    for a suite rendered with thinking off (bench.thinking): its outputs have no thinking segment,
    even where the verifier emits a stray `</think>`."""
    if (
        suite is not None
        and suite.records
        and all(dict(r.template_kwargs).get("thinking") is False for r in suite.records)
    ):
        return None
    return end_think_token(tokenizer)


def record_cell(run: BenchRun, cell: CellSpec, measured: MeasuredCell) -> None:
    rows = measured.rows
    write_cell(run.run_dir, cell.id, rows, measured.requests)
    run.rows.extend(rows)
    rs = rows[1]
    for f in rs.flags:
        run.reporter.log(f"[{cell.id}] {f}")
    run.reporter.advance(
        1, AL=rs.acceptance_length or float("nan"), tok_s=rs.output_tok_per_s or 0.0, speedup=rs.speedup or 0.0
    )
