"""`harness bench`: the matrix suites x k x concurrency x temperature, every speculative cell
paired with a baseline arm on the same prompts, max tokens, sampling, concurrency and
parallelism, the pair run A/B interleaved (the order alternates between repeats so drift
cancels), warm-up excluded. The baseline arm is measured once per (verifier, suite,
concurrency, temperature) and shared by every draft and k (bench.shared_baseline): one
denominator for all of them, and no engine time spent measuring it again. Rows are written
cell by cell (harness/results/table.py).

Engines: one baseline engine per verifier stays up for the whole run; one speculative engine
per (draft, k) — k is an engine setting in vLLM — runs all of its cells, then stops. A CPU
server's first speculative engine starts beside the baseline (a start is one core's imports there).
Where the two cannot be up at once (bench.engine_schedule, harness/cluster.py), the engines run
one at a time instead: harness/bench/one_at_a_time.py, with the same arms and the same rows.

The loop reads top to bottom: plan the cells, open the run, then per verifier start the
baseline, per (draft, k) start the speculative engine, measure each cell, write it.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from harness import interrupts, metrics
from harness.analysis import slo
from harness.analysis.machine import FOREIGN_CPU_LIMIT, MachineReading, foreign_cpu, spread, tolerance
from harness.bench.breakdown import RepeatRecord, RequestRecord
from harness.bench.cpu_ticks import read_ticks
from harness.bench.dynamic import derive_schedule, dynamic_label
from harness.bench.grid import CellSpec, plan_grid, recipe_suite_aliases
from harness.bench.manifest import (
    open_run,
    record_engine,
    run_status,
    start_manifest,
    update_manifest,
)
from harness.bench.one_at_a_time import (
    EngineKey,
    bench_one_at_a_time,
    phase_plan,
    refuse_what_one_at_a_time_cannot_run,
)
from harness.bench.rows import ArmResult, CellIdentity, CellRow, cell_rows
from harness.bench.shards import Shard, run_id_of, shard_cells, shard_fields
from harness.cluster import engine_schedule
from harness.draft.under_test import DraftUnderTest, verifier_identity
from harness.draft.verifier import load_tokenizer
from harness.engine.background_start import BackgroundStart
from harness.engine.base import Arrivals, BatchResult, Engine, GenOutput, GenRequest, Rescorer, Sampling
from harness.engine.settings import (
    EnginePlan,
    SpeculativeSpec,
    engine_plan,
    refuse_what_vllm_cannot_run,
)
from harness.errors import BadInput
from harness.prompts import PromptRecord, end_think_token, render, with_answer
from harness.recipe import Recipe
from harness.results.manifest import read_manifest_data
from harness.results.table import ensure_tables, finished_cells, load_rows, write_cell
from harness.suites import Suite, load_suites, with_prefix_caching, with_thinking
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout

Prompts = list[tuple[PromptRecord, list[int]]]
EngineFactory = Callable[[EnginePlan, str], Engine]


@dataclass(frozen=True)
class SharedBaseline:
    """A measured baseline arm, the cell it was measured in, and the machine sentinels around it."""

    arm: ArmResult
    cell_id: str
    sentinels: tuple[float, ...] = ()
    foreign_cpu: float = 0.0  # the share of the machine's CPUs other processes used while it ran


@dataclass(frozen=True)
class Clock:
    """The sentinel job timed on the baseline engine (harness/analysis/machine.py) and the spread
    of its calibration runs."""

    requests: tuple[GenRequest, ...]
    sampling: Sampling
    noise: float


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


@dataclass(frozen=True)
class VerifierShared:
    """What every speculative engine of one verifier shares (bench_verifier): the baseline engine,
    the verifier's tokenizer and every suite's rendered prompts, by suite name."""

    base_engine: Engine
    tokenizer: Any
    prompts: dict[str, Prompts]


# ----------------------------------------------------------------------------- planning


def plan_cells(recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]) -> list[CellSpec]:
    """harness/bench/grid.py plan_grid over the loaded suites (bench.extra_cells may name a suite by
    its recipe spec, its name before a thinking mode, or its own name)."""
    names = [s.name for s in suites]
    return plan_grid(recipe.bench, [d.label for d in drafts], names, recipe_suite_aliases(recipe.bench, names))


def render_requests(tokenizer, suite: Suite, max_prompt: int, allow_random: bool = False) -> Prompts:
    """The suite's prompts as token ids; refuses a prompt that does not fit, and a suite of
    random-token prompts unless `allow_random` (bench.allow_random_prompts)."""
    out = []
    for rec in suite.records:
        ids = render(tokenizer, rec)
        if len(ids) > max_prompt:
            raise BadInput(
                f"suite {suite.name}: prompt {rec.id} has {len(ids)} tokens, more than "
                f"engine.max_model_len - bench.max_tokens = {max_prompt}; raise engine.max_model_len, "
                "lower bench.max_tokens or drop the prompt"
            )
        out.append((rec, ids))
    flag = random_suite_flag(tokenizer, out)
    if flag and not allow_random:
        raise BadInput(
            f"suite {suite.name}: {flag.partition(': ')[2]}; use text users send, or set "
            "bench.allow_random_prompts = true to measure them anyway (their cells are flagged)"
        )
    return out


def random_suite_flag(tokenizer, prompts: Prompts) -> str | None:
    """RANDOM PROMPTS when most of the rendered prompts look like random token ids
    (harness/analysis/content.py)."""
    from harness.analysis.content import random_suite

    return random_suite([ids for _, ids in prompts], len(tokenizer))


def sampling_for(recipe: Recipe, temperature: float, layout: VerifierLayout) -> Sampling:
    # At T = 0 both arms return the verifier's top-N logprobs, so a miss can be located and its
    # margin read (harness/analysis/lossless.py); at T > 0 the reference is a re-score by the
    # baseline engine instead (rescored_arms). Off with bench.lossless_logprobs = 0.
    n = recipe.bench.lossless_logprobs
    return Sampling(
        temperature=temperature,
        top_p=recipe.bench.top_p if temperature > 0 else 1.0,
        seed=recipe.engine.seed,
        ignore_eos=recipe.bench.ignore_eos,
        stop_token_ids=tuple(layout.eos_token_ids),
        logprobs=n if temperature == 0 and n > 0 else None,
    )


def engine_noise(
    engine: Engine,
    tokenizer,
    prompts: Prompts,
    sampling: Sampling,
    max_tokens: int,
    concurrency: int,
    max_prompt: int,
    base: ArmResult,
) -> float | None:
    """The baseline engine's own numeric jitter on these prompts: the baseline arm again at
    another batch shape (concurrency 1, or all prompts at once when the cell ran at 1), compared
    with the measured baseline arm (harness.analysis.lossless.noise_margin). Run only when a
    T = 0 cell has a miss; None without logprobs."""
    from harness.analysis.lossless import noise_margin

    if sampling.logprobs is None or not base.logprobs:
        return None
    again = ArmResult()
    other = 1 if concurrency > 1 else max(2, len(prompts))
    run_arm(engine, tokenizer, prompts, sampling, max_tokens, other, max_prompt, again)
    ids = sorted(set(base.logprobs) & set(again.logprobs))
    return noise_margin(
        [(base.outputs[i], base.logprobs[i]) for i in ids], [(again.outputs[i], again.logprobs[i]) for i in ids]
    )


# ----------------------------------------------------------------------------- one arm


def _turn_requests(
    tokenizer,
    prompts: Prompts,
    turn: int,
    histories: dict[str, list[dict[str, str]]],
    max_tokens: int,
    max_prompt: int,
    fresh_prefix: bool = False,
) -> tuple[list[GenRequest], list]:
    """The requests of one round: first turns as rendered, later turns with the answers fed back;
    `fresh_prefix`: each with a cache salt of its own (no prefix-cache reuse)."""
    reqs, sent = [], []
    for rec, ids in prompts:
        if turn >= rec.num_turns:
            continue
        msgs = rec.first_messages()
        if turn > 0:
            if rec.id not in histories:
                continue  # an earlier turn failed
            assert rec.turns is not None  # turn < num_turns with turn > 0: a multi-turn record
            msgs = histories[rec.id] + [{"role": "user", "content": rec.turns[turn]}]
            ids = render(tokenizer, rec, msgs)
            if len(ids) > max_prompt:
                continue  # the conversation outgrew the context: it ends here
        salt = f"nocache-{uuid.uuid4().hex}" if fresh_prefix else None
        reqs.append(GenRequest(f"{rec.id}#{turn}", tuple(ids), max_tokens, salt))
        sent.append((rec, msgs))
    return reqs, sent


def run_arm(
    engine: Engine,
    tokenizer,
    prompts: Prompts,
    sampling: Sampling,
    max_tokens: int,
    concurrency: int,
    max_prompt: int,
    acc: ArmResult,
    arrivals: Arrivals | None = None,
    fresh_prefix: bool = False,
) -> None:
    """One repeat of one arm: all prompts, multi-turn records in rounds (answers fed back); with
    `arrivals`, each round sent open-loop on the same seeded schedule (both arms alike); with
    `fresh_prefix`, no request reuses another's cached prompt blocks."""
    histories: dict[str, list[dict[str, str]]] = {}
    end_think = end_think_token(tokenizer)  # once per arm: answers fed back end their thinking there
    wall, tokens = 0.0, 0
    repeat, done = len(acc.repeats), []
    for turn in range(max(r.num_turns for r, _ in prompts)):
        reqs, sent = _turn_requests(tokenizer, prompts, turn, histories, max_tokens, max_prompt, fresh_prefix)
        if not reqs:
            break
        # arrivals only when open-loop: engines and test wrappers without the parameter keep working
        res: BatchResult = (
            engine.generate(reqs, sampling, concurrency, arrivals=arrivals)
            if arrivals
            else engine.generate(reqs, sampling, concurrency)
        )
        wall += res.wall_s
        tokens += res.num_output_tokens
        acc.counters = acc.counters + res.counters
        if res.generation_tokens is not None:
            acc.foreign_tokens += res.generation_tokens - res.num_output_tokens
        _add_at(acc.tokens_wall_by_turn, turn, (res.num_output_tokens, res.wall_s))
        if res.prefix_cache is not None:
            _add_at(acc.prefix_cache_by_turn, turn, res.prefix_cache)
        for (rec, msgs), o in zip(sent, res.outputs, strict=True):
            collect_output(acc, o, repeat)
            done += [o] if o.ok else []
            if rec.turns and o.ok:
                thinking = dict(rec.template_kwargs).get("thinking") is not False
                histories[rec.id] = with_answer(tokenizer, msgs, o.output_token_ids, end_think if thinking else None)
    acc.wall_s += wall
    acc.num_output_tokens += tokens
    acc.repeats.append(
        RepeatRecord(
            tokens,
            wall,
            tuple(o.request_id for o in done),
            tuple(len(o.output_token_ids) for o in done),
            tuple(o.latency_s or 0.0 for o in done),
        )
    )
    if wall > 0:
        acc.tok_s_repeats.append(tokens / wall)


def _add_at(per_turn: list[list[float]], turn: int, values: tuple[float, float]) -> None:
    """Add a round's pair of figures to its turn's running sums."""
    while len(per_turn) <= turn:
        per_turn.append([0.0, 0.0])
    per_turn[turn][0] += values[0]
    per_turn[turn][1] += values[1]


def request_record(o: GenOutput, repeat: int) -> RequestRecord:
    """What the breakdowns keep of a finished request (vLLM's per-step arrays when it gave them)."""
    spec = o.spec
    if spec is None:  # no speculation (the baseline arm), or a failed request
        return RequestRecord(
            o.request_id,
            repeat,
            o.prompt_len,
            tuple(o.output_token_ids),
            o.latency_s,
            (),
            (),
            None,
            False,
            o.finish_reason,
            o.ttft_s,
            o.sent_s,
            o.queue_s,
        )
    has_steps = bool(spec.per_step_accepted) or not spec.num_spec_steps
    return RequestRecord(
        o.request_id,
        repeat,
        o.prompt_len,
        tuple(o.output_token_ids),
        o.latency_s,
        spec.per_step_accepted,
        spec.per_step_drafted,
        spec.num_spec_tokens,
        has_steps,
        o.finish_reason,
        o.ttft_s,
        o.sent_s,
        o.queue_s,
    )


def collect_output(acc: ArmResult, o: GenOutput, repeat: int = 0) -> None:
    acc.num_requests += 1
    if not o.ok:
        acc.errors.append(f"{o.request_id}: {o.error}")
        return
    acc.outputs.setdefault(o.request_id, o.output_token_ids)
    if o.logprobs is not None:
        acc.logprobs.setdefault(o.request_id, o.logprobs)
    acc.requests.append(request_record(o, repeat))
    if o.ttft_s is not None:
        acc.ttft.append(o.ttft_s * 1000)
    if o.itl_s:
        acc.itl += [x * 1000 for x in o.itl_s]
        acc.itl_per_token += [x * 1000 for x in metrics.per_token_itl(o.itl_s, o.itl_tokens)]
    if o.latency_s:
        acc.e2e.append(o.latency_s * 1000)
    if o.latency_s and o.ttft_s is not None and len(o.output_token_ids) > 1:
        acc.tpot.append((o.latency_s - o.ttft_s) * 1000 / (len(o.output_token_ids) - 1))
    if o.spec is not None:
        drafts = o.spec.num_spec_steps or 0
        accepted = o.spec.num_accepted_draft_tokens or 0
        acc.per_request.append((accepted, drafts))
        if drafts:
            acc.per_request_al.append(1 + accepted / drafts)


# ----------------------------------------------------------------------------- engines


def warm_up(engine: Engine, prompts: Prompts, recipe: Recipe, layout: VerifierLayout) -> None:
    """Unmeasured requests under each temperature's sampling settings: the first request that asks
    for logprobs (or samples) pays a one-time cost in vLLM (measured: +2-4 s on the first arm
    when the warm-up asked for neither, which read as a 1.0x random draft)."""
    n = recipe.bench.warmup_requests
    if n <= 0:
        return
    temps = sorted(set(recipe.bench.temperature) | {x.temperature for x in recipe.bench.extra_cells})
    for t in temps:
        reqs = [
            GenRequest(f"warmup-t{t:g}-{i}", tuple(prompts[i % len(prompts)][1]), min(16, recipe.bench.max_tokens))
            for i in range(n)
        ]
        engine.generate(reqs, sampling_for(recipe, t, layout), max(recipe.bench.concurrency))


def default_engine_factory(recipe: Recipe, run_dir: Path) -> EngineFactory:
    def make(plan: EnginePlan, name: str) -> Engine:
        kind = recipe.bench.engine
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
                plan, run_dir / "logs" / f"{name}.log", recipe.engine.startup_timeout_s, recipe.engine.request_timeout_s
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


# ----------------------------------------------------------------------------- one cell


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
    return MeasuredCell(
        rows, {"baseline": [r.to_dict() for r in barm.requests], "speculative": [r.to_dict() for r in sarm.requests]}
    )


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
    timeline = [sentinel_tok_s(engines[0], clock)] if clock else []
    brackets: dict[str, list[float]] = {"baseline": [], "speculative": []}
    foreign: dict[str, float] = {"baseline": 0.0, "speculative": 0.0}  # the most other processes used

    def measure(which: str, arm: ArmResult) -> None:
        cpu = timed_arm(run, engines[0] if which == "baseline" else engines[1], cell, inputs, arm, clock is not None)
        if clock:  # the sentinels before and after this arm, and the CPU others took while it ran
            foreign[which] = max(foreign[which], cpu)
            timeline.append(sentinel_tok_s(engines[0], clock))
            brackets[which] += timeline[-2:]

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
            spread(measured.sentinels + tuple(timeline)) > tolerance(clock.noise)
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
        )
    )
    return MeasuredArms(barm, sarm, measured.cell_id if measured else cell.id, reading)


def timed_arm(run: BenchRun, engine: Engine, cell: CellSpec, inputs: ArmInputs, arm: ArmResult, cpu: bool) -> float:
    """One repeat of the cell's arm on `engine`; with `cpu`, the share of the machine's CPUs that
    other processes used while it ran (0 without)."""
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
    )
    after = read_ticks() if before is not None else None
    return foreign_cpu(before, after) if before is not None and after is not None else 0.0


def sentinel_tok_s(engine: Engine, clock: Clock) -> float:
    """One run of the sentinel job: its output tok/s (the machine's speed index now)."""
    res = engine.generate(list(clock.requests), clock.sampling, len(clock.requests))
    if res.wall_s <= 0 or not all(o.ok for o in res.outputs):
        return 0.0  # no reading (spread ignores it); a failing engine fails the cell's own arms
    return res.num_output_tokens / res.wall_s


def calibrate_clock(engine: Engine, prompts: Prompts, recipe: Recipe) -> Clock | None:
    """The sentinel job (the first prompts, greedy, a fixed length) and the machine's noise: the
    spread of a few runs back to back on the warm baseline engine. None when bench.machine_sentinel
    is off."""
    from harness.analysis import machine

    if not recipe.bench.machine_sentinel:
        return None
    reqs = tuple(
        GenRequest(f"sentinel-{i}", tuple(ids), machine.sentinel_tokens(recipe.bench.max_tokens))
        for i, (_, ids) in enumerate(prompts[: machine.SENTINEL_PROMPTS])
    )
    clock = Clock(reqs, Sampling(temperature=0.0, seed=recipe.engine.seed, ignore_eos=True), 0.0)
    speeds = [sentinel_tok_s(engine, clock) for _ in range(machine.CALIBRATION_RUNS)]
    return replace(clock, noise=spread(speeds))


def rescored_arms(
    base_engine: Engine, prompts: Prompts, arms: tuple[ArmResult, ArmResult], sampling: Sampling, num_top: int
) -> tuple[list, list] | None:
    """For the T > 0 test: each arm's first-turn outputs with the verifier's sampling distribution
    at every output position, from the no-speculation engine re-scoring prompt + output, kept as
    `num_top` buckets (a `RescoredArms`, whose `rescore` the rows keep as sampling_rescore). At
    T = 1 without top-p the raw distribution is the sampling one: the engine returns its top
    tokens and the output's. Otherwise a `SamplingRescorer` (the offline engine) applies
    temperature and top-p in vLLM's worker and returns the same few numbers; any other
    `Rescorer` (a server) returns the whole vocabulary per position, processed here. Top tokens
    come with RESCORE_MARGIN more, for ties. None when the engine is no `Rescorer`
    (harness/engine/base.py) or the test is off (bench.lossless_logprobs = 0)."""
    from harness.analysis.lossless_sampling import RESCORE_MARGIN, RescoredArms, raw_is_sampling, rescored_samples
    from harness.engine.base import RESCORE_RAW_TOP, RESCORE_WHOLE_VOCABULARY, SamplingRescorer

    if num_top <= 0 or not isinstance(base_engine, Rescorer):
        return None
    t, top_p, top = sampling.temperature, sampling.top_p, num_top + RESCORE_MARGIN
    out, paths = [], []
    for arm in arms:
        ids = [(list(p_ids), arm.outputs[f"{rec.id}#0"]) for rec, p_ids in prompts if f"{rec.id}#0" in arm.outputs]
        seqs = [(p + o, len(p)) for p, o in ids]
        if raw_is_sampling(t, top_p):
            dists, path, is_sampling = base_engine.rescore(seqs, top), RESCORE_RAW_TOP, True
        elif isinstance(base_engine, SamplingRescorer):
            res = base_engine.rescore_sampling(seqs, t, top_p, top)
            dists, path, is_sampling = res.dists, res.path, True
        else:
            dists, path, is_sampling = base_engine.rescore(seqs, None), RESCORE_WHOLE_VOCABULARY, False
        out.append(rescored_samples([o for _, o in ids], dists, t, top_p, num_top, is_sampling))
        paths.append(path)
    return RescoredArms(out[0], out[1], "; ".join(dict.fromkeys(paths)))


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
    write_cell(run.run_dir, cell.id, [r.to_dict() for r in rows], measured.requests)
    rs = rows[1]
    for f in rs.flags:
        run.reporter.log(f"[{cell.id}] {f}")
    run.reporter.advance(
        1, AL=rs.acceptance_length or float("nan"), tok_s=rs.output_tok_per_s or 0.0, speedup=rs.speedup or 0.0
    )


# ----------------------------------------------------------------------------- the loop


def _by_verifier(drafts: list[DraftUnderTest]) -> Iterator[tuple[VerifierLayout, list[DraftUnderTest]]]:
    layouts = {d.verifier.path: d.verifier for d in drafts}
    for path, layout in layouts.items():
        yield layout, [d for d in drafts if d.verifier.path == path]


def bench_verifier(run: BenchRun, layout: VerifierLayout, drafts: list[DraftUnderTest], todo: list[CellSpec]) -> None:
    """One baseline engine for the verifier; one speculative engine per (draft, k) with cells to run.
    A CPU server's first speculative engine starts beside the baseline (harness/engine/background_start.py):
    both are up, idle, before the baseline warms up and calibrates the machine's clock. Offline engines
    start one after the other: their hosts imported vLLM ahead (prespawn), and opening an engine is
    multi-threaded work that two at once only slow down (measured: 13.7 s together vs 4.7 + 7.2 s)."""
    labels = {d.label for d in drafts} | {dynamic_label(d.label) for d in drafts}
    cells = [c for c in todo if c.draft in labels]
    if not cells:
        return
    recipe = run.recipe
    tok, prompts = run.prompts[layout.path]
    first = next(iter(prompts.values()))
    engines = {
        (d.label, k): kcells
        for d in drafts
        for k in recipe.bench.k
        if (kcells := [c for c in cells if c.draft == d.label and c.k == k])
    }
    if engine_schedule(recipe) == "one_at_a_time":  # dynamic cells were refused (run_bench)
        bench_one_at_a_time(OneAtATimeSteps(run, layout, drafts), phase_plan(engines, recipe.bench.repeats))
        return

    early: BackgroundStart | None = None
    if engines and recipe.engine.device == "cpu" and recipe.bench.engine == "server":
        label, k0 = next(iter(engines))
        early = BackgroundStart(lambda: _spec_engine(run, layout, next(d for d in drafts if d.label == label), k0))
    started: dict[tuple[str, int], Engine] = {}  # the early engine until its cells run
    try:
        with run.make_engine(engine_plan(recipe.engine, layout), f"baseline-{Path(layout.path).name}") as base_engine:
            record_engine(run.run_dir, "baseline", base_engine)
            if early is not None:
                started[next(iter(engines))] = early.result()
            warm_up(base_engine, first, recipe, layout)
            _calibrate(run, layout, base_engine)
            for d in drafts:
                for k in recipe.bench.k:
                    if (d.label, k) not in engines:
                        continue
                    with started.pop((d.label, k), None) or _spec_engine(run, layout, d, k) as spec_engine:
                        record_engine(run.run_dir, f"{d.label}-k{k}", spec_engine)
                        warm_up(spec_engine, first, recipe, layout)
                        for cell in engines[(d.label, k)]:
                            measured = measure_cell(run, cell, d, (base_engine, spec_engine), tok, prompts[cell.suite])
                            record_cell(run, cell, measured)
                dyn = [c for c in cells if c.draft == dynamic_label(d.label)]
                if dyn:
                    bench_dynamic(run, layout, d, dyn, VerifierShared(base_engine, tok, prompts))
    finally:
        if early is not None:
            early.abandon()  # closes it when it comes up, had it not been handed over
        for engine in started.values():  # handed over, but the run failed before its cells
            engine.close()


def _spec_engine(run: BenchRun, layout: VerifierLayout, draft: DraftUnderTest, k: int) -> Engine:
    spec = SpeculativeSpec(draft.method, k, draft.path, run.recipe.bench.rejection_sample_method)
    return run.make_engine(engine_plan(run.recipe.engine, layout, spec), f"{draft.label}-k{k}")


def _calibrate(run: BenchRun, layout: VerifierLayout, base_engine: Engine) -> Clock | None:
    """The verifier's clock (calibrate_clock) on its warm baseline engine, kept in `run` and the manifest."""
    _, prompts = run.prompts[layout.path]
    clock = calibrate_clock(base_engine, next(iter(prompts.values())), run.recipe)
    if clock is not None:
        run.clocks[layout.path] = clock
        noise = read_manifest_data(run.run_dir, missing_ok=True).get("machine_noise") or {}
        update_manifest(run.run_dir, machine_noise={**noise, Path(layout.path).name: round(clock.noise, 4)})
    return clock


class OneAtATimeSteps:
    """One verifier's engines, arms, sentinels and rows as the one-at-a-time schedule asks for them
    (harness/bench/one_at_a_time.py Steps): the same pieces the side-by-side loop uses."""

    def __init__(self, run: BenchRun, layout: VerifierLayout, drafts: list[DraftUnderTest]):
        self.run, self.layout, self.drafts = run, layout, {d.label: d for d in drafts}
        self.run_dir, self.verifier = run.run_dir, Path(layout.path).name
        self.tokenizer, self.prompts = run.prompts[layout.path]

    def start(self, engine: EngineKey | None, phase: str) -> Engine:
        if engine is None:  # the second baseline start gets a log and a manifest entry of its own
            name = "baseline" if phase == "A1" else f"baseline-{phase.lower()}"
            started = self.run.make_engine(engine_plan(self.run.recipe.engine, self.layout), f"{name}-{self.verifier}")
        else:
            name = f"{engine[0]}-k{engine[1]}"
            started = _spec_engine(self.run, self.layout, self.drafts[engine[0]], engine[1])
        try:
            record_engine(self.run_dir, name, started)
        except BaseException:
            started.close()
            raise
        return started

    def warm_up(self, engine: Engine) -> None:
        warm_up(engine, next(iter(self.prompts.values())), self.run.recipe, self.layout)

    def calibrate(self, engine: Engine) -> float | None:
        clock = _calibrate(self.run, self.layout, engine)
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


def bench_dynamic(
    run: BenchRun, layout: VerifierLayout, draft: DraftUnderTest, cells: list[CellSpec], shared: VerifierShared
) -> None:
    """The draft's best-k schedule, derived from its finished fixed-k cells, as an engine of its own."""
    prompts = shared.prompts
    schedule = derive_schedule(load_rows(run.run_dir), draft.label)
    if schedule is None:
        run.reporter.log(f"[{draft.label}] dynamic k: no finished fixed-k cell to derive a schedule from; skipped")
        return
    b = run.recipe.bench
    known = read_manifest_data(run.run_dir, missing_ok=True).get("dynamic_k") or {}
    update_manifest(run.run_dir, dynamic_k={**known, dynamic_label(draft.label): [list(r) for r in schedule]})
    spec = SpeculativeSpec(draft.method, max(b.k), draft.path, b.rejection_sample_method, k_schedule=schedule)
    dyn = replace(draft, label=dynamic_label(draft.label), held_out_full_acc=())  # k varies: no prediction
    with run.make_engine(engine_plan(run.recipe.engine, layout, spec), dyn.label) as spec_engine:
        record_engine(run.run_dir, dyn.label, spec_engine)
        warm_up(spec_engine, next(iter(prompts.values())), run.recipe, layout)
        for cell in cells:
            measured = measure_cell(
                run, cell, dyn, (shared.base_engine, spec_engine), shared.tokenizer, prompts[cell.suite]
            )
            measured.rows[1].k_schedule = json.dumps([list(r) for r in schedule])
            record_cell(run, cell, measured)


def check_prompts_fit(recipe: Recipe, layout: VerifierLayout) -> None:
    """The recipe's suites load, have distinct names and fit the verifier's context (the main
    job asks before training, not after)."""
    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    for s in recipe_suites(recipe):
        render_requests(
            tok, s, recipe.engine.max_model_len - recipe.bench.max_tokens, recipe.bench.allow_random_prompts
        )


def render_all(
    recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]
) -> dict[str, tuple[Any, dict[str, Prompts]]]:
    """Every suite's prompts rendered by each verifier's tokenizer, before any engine: a prompt
    longer than engine.max_model_len - bench.max_tokens is refused now, in a second. Offline
    engine hosts are spawned first, so vLLM imports while the prompts render."""
    out = {}
    max_prompt = recipe.engine.max_model_len - recipe.bench.max_tokens
    for layout, _ in _by_verifier(drafts):
        # offline: the baseline and the first speculative engine side by side, or (engines one at a
        # time) each engine on the host the last one left
        if recipe.bench.engine == "offline":
            from harness.engine.offline import prespawn

            prespawn(engine_plan(recipe.engine, layout), 2 if engine_schedule(recipe) == "side_by_side" else 1)
        tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
        out[layout.path] = (
            tok,
            {s.name: render_requests(tok, s, max_prompt, recipe.bench.allow_random_prompts) for s in suites},
        )
    return out


def recipe_suites(recipe: Recipe) -> list[Suite]:
    """The recipe's suites, a `PATH#by-category` file expanded into one suite per category."""
    b = recipe.bench
    return with_prefix_caching(
        with_thinking(load_suites(b.suites, b.num_prompts, b.hf_field_map), b.thinking), b.prefix_caching
    )


def run_bench(
    recipe: Recipe,
    drafts: list[DraftUnderTest],
    run_dir: Path,
    reporter: Reporter,
    engine_factory: EngineFactory | None = None,
    resume: bool = False,
    shard: Shard | None = None,
) -> Path:
    """Run (or resume) the matrix, or with `shard` this node's share of it (harness/bench/shards.py);
    returns the run folder."""
    suites = recipe_suites(recipe)
    cells = plan_cells(recipe, drafts, suites)
    if shard is not None:
        cells = shard_cells(recipe, drafts, suites, cells, shard)
    for d in drafts:  # what vLLM cannot serve stops here: one line, exit 2, no run folder
        refuse_what_vllm_cannot_run(recipe.engine, d.verifier, d.method)
    refuse_what_one_at_a_time_cannot_run(recipe)
    prompts = render_all(recipe, drafts, suites)  # a prompt too long for the context: exit 2, no run folder
    open_run(run_dir, recipe, resume)
    vhash = {d.verifier.path: verifier_identity(d.verifier.path) for d in drafts}
    start_manifest(run_dir, recipe, [c.id for c in cells], drafts, suites, vhash)
    update_manifest(run_dir, engine_schedule=engine_schedule(recipe), **shard_fields(run_dir, shard))
    run = BenchRun(
        recipe,
        run_dir,
        reporter,
        engine_factory or default_engine_factory(recipe, run_dir),
        {s.name: s for s in suites},
        vhash,
        prompts=prompts,
        run_id=run_id_of(run_dir, shard),
    )
    done = finished_cells(run_dir)
    todo = [c for c in cells if c.id not in done]
    reporter.stage("bench cells", total=len(cells))
    reporter.advance(len(cells) - len(todo))
    try:
        with run_status(run_dir, reporter):
            for layout, vdrafts in _by_verifier(drafts):
                bench_verifier(run, layout, vdrafts, todo)
    finally:  # the tables once, from every finished cell, however the run ends (cells are the record)
        ensure_tables(run_dir)
    return run_dir


def bench_run_dir(recipe: Recipe, run_id: str | None, resume: bool) -> Path:
    """The run folder `harness bench` writes: a resumable one (--resume: it must exist), or a new
    one (an unknown id, or a folder whose run finished no cell)."""
    from harness.paths import RUNS_DIR
    from harness.results.manifest import free_unstarted_run, require_resumable

    if resume and not run_id:
        raise BadInput("--resume needs --run-id of the run to complete")
    run_dir = RUNS_DIR / (run_id or new_run_id(recipe))
    if resume:
        require_resumable(run_dir)
    else:
        free_unstarted_run(run_dir, finished_cells(run_dir))
    return run_dir


def new_run_id(recipe: Recipe) -> str:
    return f"{recipe.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
