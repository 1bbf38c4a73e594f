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
With gate.max_prompts, the candidate's cells and their baseline-draft twins are measured together in
rounds, the baseline draft's engine up beside the candidate's, and stop when the paired verdict
settles (harness/bench/sequential.py); the baseline draft's engine does not start again for them.
With bench.race, every (draft, k) engine is up at once and each setting's arms draw prompts in rounds
until the fastest is settled, an arm leaving as soon as its rank is (harness/bench/race.py).

The loop reads top to bottom: plan the cells, open the run, then per verifier start the
baseline, per (draft, k) start the speculative engine, measure each cell, write it. Its pieces:
planning.py (suites, cells, rendered prompts), run_state.py (what the steps share), engines.py,
arm.py (one arm on one engine), clock.py (the machine's sentinel), cell.py (a cell's two arms and
its rows), lossless_probes.py, dynamic_arm.py and one_at_a_time_steps.py.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from harness.bench.arm import warm_up
from harness.bench.cell import measure_cell, record_cell
from harness.bench.dynamic import dynamic_label
from harness.bench.dynamic_arm import VerifierShared, bench_dynamic
from harness.bench.engines import calibrate_verifier_clock, default_engine_factory, start_spec_engine
from harness.bench.grid import CellSpec
from harness.bench.machine_record import read_record
from harness.bench.manifest import open_run, record_engine, run_status, start_manifest, update_manifest
from harness.bench.one_at_a_time import bench_one_at_a_time, phase_plan, refuse_what_one_at_a_time_cannot_run
from harness.bench.one_at_a_time_steps import OneAtATimeSteps
from harness.bench.placement import BaselineKey, baseline_key
from harness.bench.planning import drafts_by_verifier, plan_cells, recipe_suites, render_all
from harness.bench.race import race_setting
from harness.bench.rounds import BASELINE
from harness.bench.run_state import BenchRun, EngineFactory
from harness.bench.sequential import measure_in_rounds
from harness.bench.shards import Shard, run_id_of, shard_cells, shard_fields
from harness.cluster import engine_schedule
from harness.draft.under_test import BASELINE_DRAFT, DraftUnderTest, verifier_identity
from harness.engine.background_start import BackgroundStart
from harness.engine.base import Engine
from harness.engine.settings import engine_plan, refuse_what_vllm_cannot_run
from harness.recipe import Recipe
from harness.results.table import ensure_tables, finished_cells, read_rows
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout


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
        early = BackgroundStart(lambda: start_spec_engine(run, layout, next(d for d in drafts if d.label == label), k0))
    started: dict[tuple[str, int], Engine] = {}  # the early engine until its cells run
    twins = round_twins(recipe, drafts, cells)  # candidate cell -> its baseline-draft twin (gate.max_prompts)
    paired_done: set[CellSpec] = set()
    try:
        with run.make_engine(engine_plan(recipe.engine, layout), f"baseline-{Path(layout.path).name}") as base_engine:
            record_engine(run.run_dir, "baseline", base_engine)
            if early is not None:
                started[next(iter(engines))] = early.result()
            warm_up(base_engine, first, recipe, layout)
            calibrate_verifier_clock(run, layout, base_engine)
            if recipe.bench.race:
                race_engines(run, layout, drafts, engines, base_engine, started)
            for d in drafts:
                if not recipe.bench.race:
                    fixed = {
                        k: [c for c in kc if c not in paired_done] for (lb, k), kc in engines.items() if lb == d.label
                    }
                    paired_done.update(bench_draft(run, layout, drafts, d, fixed, started, base_engine, twins))
                dyn = [c for c in cells if c.draft == dynamic_label(d.label)]
                if dyn:
                    bench_dynamic(run, layout, d, dyn, VerifierShared(base_engine, tok, prompts))
    finally:
        if early is not None:
            early.abandon()  # closes it when it comes up, had it not been handed over
        for engine in started.values():  # handed over, but the run failed before its cells
            engine.close()


def bench_draft(
    run: BenchRun,
    layout: VerifierLayout,
    drafts: list[DraftUnderTest],
    d: DraftUnderTest,
    by_k: dict[int, list[CellSpec]],
    started: dict[tuple[str, int], Engine],
    base_engine: Engine,
    twins: dict[CellSpec, CellSpec],
) -> list[CellSpec]:
    """Draft `d`'s cells, one speculative engine per k in turn (the early-started one where it is up);
    returns the baseline-draft twins measured in rounds beside them (bench_engine)."""
    first = next(iter(run.prompts[layout.path][1].values()))
    done: list[CellSpec] = []
    for k, kcells in by_k.items():
        if not kcells:
            continue  # every cell measured in rounds beside its candidate's
        with started.pop((d.label, k), None) or start_spec_engine(run, layout, d, k) as spec_engine:
            record_engine(run.run_dir, f"{d.label}-k{k}", spec_engine)
            warm_up(spec_engine, first, run.recipe, layout)
            done += bench_engine(run, layout, drafts, d, kcells, twins, (base_engine, spec_engine))
    return done


def bench_engine(
    run: BenchRun,
    layout: VerifierLayout,
    drafts: list[DraftUnderTest],
    d: DraftUnderTest,
    kcells: list[CellSpec],
    twins: dict[CellSpec, CellSpec],
    engines: tuple[Engine, Engine],
) -> list[CellSpec]:
    """Every cell of one speculative engine: those with a baseline-draft twin in rounds beside it
    (measure_twins), the rest one by one; returns the twins measured with them."""
    tok, prompts = run.prompts[layout.path]
    twin_of = {c: t for c in kcells if (t := twins.get(c)) is not None}
    done = measure_twins(run, layout, drafts, d, kcells[0].k, twin_of, engines) if twin_of else []
    for cell in kcells:
        if cell not in twin_of:
            record_cell(run, cell, measure_cell(run, cell, d, engines, tok, prompts[cell.suite]))
    return done


def measure_twins(
    run: BenchRun,
    layout: VerifierLayout,
    drafts: list[DraftUnderTest],
    candidate: DraftUnderTest,
    k: int,
    twin_of: dict[CellSpec, CellSpec],
    engines: tuple[Engine, Engine],
) -> list[CellSpec]:
    """The candidate's cells at k and their baseline-draft twins, measured in rounds with the baseline
    draft's engine up beside the candidate's (harness/bench/sequential.py); the twins measured."""
    tok, prompts = run.prompts[layout.path]
    twin = next(x for x in drafts if x.label == BASELINE_DRAFT)
    with start_spec_engine(run, layout, twin, k) as other:
        record_engine(run.run_dir, f"{twin.label}-k{k}", other)
        warm_up(other, next(iter(prompts.values())), run.recipe, layout)
        for cell, twin_cell in twin_of.items():
            pair = (cell, twin_cell)
            measured, rounds = measure_in_rounds(
                run, pair, (candidate, twin), (*engines, other), tok, prompts[cell.suite]
            )
            for c, m in zip(pair, measured, strict=True):
                record_cell(run, c, m)
            run.reporter.log(rounds.line(cell.id))
    return list(twin_of.values())


def race_engines(
    run: BenchRun,
    layout: VerifierLayout,
    drafts: list[DraftUnderTest],
    engines: dict[tuple[str, int], list[CellSpec]],
    base_engine: Engine,
    started: dict[tuple[str, int], Engine],
) -> None:
    """bench.race: every (draft, k) engine up at once beside the baseline's, then each setting's cells
    raced on them (harness/bench/race.py), each cell written as its arm leaves the race."""
    tok, prompts = run.prompts[layout.path]
    first = next(iter(prompts.values()))
    by_label = {d.label: d for d in drafts}
    with ExitStack() as stack:
        spec: dict[tuple[str, int], Engine] = {}
        for label, k in engines:
            engine = started.pop((label, k), None) or start_spec_engine(run, layout, by_label[label], k)
            spec[(label, k)] = stack.enter_context(engine)
            record_engine(run.run_dir, f"{label}-k{k}", engine)
            warm_up(engine, first, run.recipe, layout)
        settings: dict[BaselineKey, list[CellSpec]] = {}  # the cells that share a baseline arm race together
        for kcells in engines.values():
            for c in kcells:
                settings.setdefault(baseline_key(c), []).append(c)
        for (suite, conc, temp, _), group in settings.items():
            on = {BASELINE: base_engine, **{c.id: spec[(c.draft, c.k)] for c in group}}
            measured, race = race_setting(run, group, by_label, on, tok, prompts[suite])
            for c, m in measured:
                record_cell(run, c, m)
            run.reporter.log(race.line(f"{suite} c={conc} T={temp:g}"))


def round_twins(recipe: Recipe, drafts: list[DraftUnderTest], cells: list[CellSpec]) -> dict[CellSpec, CellSpec]:
    """With gate.max_prompts: each cell of the candidate (the first draft) whose baseline-draft twin at the
    same setting is still to run, mapped to that twin; they are measured together in rounds
    (harness/bench/sequential.py). Empty without a budget or a baseline draft."""
    labels = [d.label for d in drafts]
    if recipe.gate.max_prompts is None or BASELINE_DRAFT not in labels or labels[0] == BASELINE_DRAFT:
        return {}
    waiting = {c for c in cells if c.draft == BASELINE_DRAFT}
    return {c: t for c in cells if c.draft == labels[0] and (t := replace(c, draft=BASELINE_DRAFT)) in waiting}


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
        between_runs=read_record(),
    )
    done = finished_cells(run_dir)
    run.rows.extend(read_rows(run_dir) if done else [])  # a resumed run's cells, read once
    todo = [c for c in cells if c.id not in done]
    reporter.stage("bench cells", total=len(cells))
    reporter.advance(len(cells) - len(todo))
    try:
        with run_status(run_dir, reporter):
            for layout, vdrafts in drafts_by_verifier(drafts):
                bench_verifier(run, layout, vdrafts, todo)
    finally:  # the tables once, from every finished cell, however the run ends (cells are the record)
        ensure_tables(run_dir)
    return run_dir
