"""`harness bench`: the matrix suites x k x concurrency x temperature, every speculative cell
paired with a baseline cell on the same prompts, max tokens, sampling, concurrency and
parallelism, the pair run A/B interleaved (the order alternates between repeats so drift
cancels), warm-up excluded. Rows are written cell by cell (harness/results/table.py).

Engines: one baseline engine per verifier stays up for the whole run; one speculative engine
per (draft, k) — k is an engine setting in vLLM — runs all of its cells, then stops.

The loop reads top to bottom: plan the cells, open the run, then per verifier start the
baseline, per (draft, k) start the speculative engine, measure each cell, write it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.bench.manifest import open_run, record_engine, run_status, start_manifest
from harness.bench.rows import ArmResult, CellIdentity, CellRow, cell_rows
from harness.draft.under_test import DraftUnderTest, verifier_identity
from harness.draft.verifier import load_tokenizer
from harness.engine.base import BatchResult, Engine, GenOutput, GenRequest, Sampling
from harness.engine.settings import EnginePlan, SpeculativeSpec, engine_plan
from harness.errors import BadInput
from harness.prompts import PromptRecord, render
from harness.recipe import Recipe
from harness.results.table import cell_id, finished_cells, write_cell
from harness.suites import Suite, load_suite
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout

Prompts = list[tuple[PromptRecord, list[int]]]
EngineFactory = Callable[[EnginePlan, str], Engine]


@dataclass(frozen=True)
class CellSpec:
    draft: str
    suite: str
    k: int
    concurrency: int
    temperature: float

    @property
    def id(self) -> str:
        return cell_id(self.draft, self.suite, self.k, self.concurrency, self.temperature)


@dataclass(frozen=True)
class BenchRun:
    """What every step of one bench run needs (built once by `run_bench`)."""

    recipe: Recipe
    run_dir: Path
    reporter: Reporter
    make_engine: EngineFactory
    suites: dict[str, Suite]
    verifier_hash: dict[str, str]


# ----------------------------------------------------------------------------- planning


def plan_cells(recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]) -> list[CellSpec]:
    """The product suites x k x concurrency x temperature per draft, plus bench.extra_cells."""
    b = recipe.bench
    cells = [CellSpec(d.label, s.name, k, c, t)
             for d in drafts for k in b.k for s in suites for c in b.concurrency for t in b.temperature]
    names = {s.name: s.name for s in suites} | {spec: s.name for spec, s in zip(b.suites, suites)}
    for d in drafts:
        for x in b.extra_cells:
            cell = CellSpec(d.label, names.get(x.suite, x.suite), x.k, x.concurrency, x.temperature)
            if cell not in cells:
                cells.append(cell)
    return cells


def render_requests(tokenizer, suite: Suite, max_prompt: int) -> Prompts:
    out = []
    for rec in suite.records:
        ids = render(tokenizer, rec)
        if len(ids) > max_prompt:
            raise BadInput(f"suite {suite.name}: prompt {rec.id} has {len(ids)} tokens, more than "
                           f"engine.max_model_len - bench.max_tokens = {max_prompt}; raise engine.max_model_len")
        out.append((rec, ids))
    return out


def sampling_for(recipe: Recipe, temperature: float, layout: VerifierLayout) -> Sampling:
    return Sampling(temperature=temperature, top_p=recipe.bench.top_p if temperature > 0 else 1.0,
                    seed=recipe.engine.seed, ignore_eos=recipe.bench.ignore_eos,
                    stop_token_ids=tuple(layout.eos_token_ids))


# ----------------------------------------------------------------------------- one arm


def _turn_requests(tokenizer, prompts: Prompts, turn: int, histories: dict[str, list[dict[str, str]]],
                   max_tokens: int, max_prompt: int) -> tuple[list[GenRequest], list]:
    """The requests of one round: first turns as rendered, later turns with the answers fed back."""
    reqs, sent = [], []
    for rec, ids in prompts:
        if turn >= rec.num_turns:
            continue
        msgs = rec.first_messages()
        if turn > 0:
            if rec.id not in histories:
                continue  # an earlier turn failed
            msgs = histories[rec.id] + [{"role": "user", "content": rec.turns[turn]}]
            ids = render(tokenizer, rec, msgs)
            if len(ids) > max_prompt:
                continue  # the conversation outgrew the context: it ends here
        reqs.append(GenRequest(f"{rec.id}#{turn}", tuple(ids), max_tokens))
        sent.append((rec, msgs))
    return reqs, sent


def run_arm(engine: Engine, tokenizer, prompts: Prompts, sampling: Sampling,
            max_tokens: int, concurrency: int, max_prompt: int, acc: ArmResult) -> None:
    """One repeat of one arm: all prompts, multi-turn records in rounds (answers fed back)."""
    histories: dict[str, list[dict[str, str]]] = {}
    wall, tokens = 0.0, 0
    for turn in range(max(r.num_turns for r, _ in prompts)):
        reqs, sent = _turn_requests(tokenizer, prompts, turn, histories, max_tokens, max_prompt)
        if not reqs:
            break
        res: BatchResult = engine.generate(reqs, sampling, concurrency)
        wall += res.wall_s
        tokens += res.num_output_tokens
        acc.counters = acc.counters + res.counters
        if res.generation_tokens is not None:
            acc.foreign_tokens += res.generation_tokens - res.num_output_tokens
        for (rec, msgs), o in zip(sent, res.outputs, strict=True):
            collect_output(acc, o)
            if rec.turns and o.ok:
                answer = tokenizer.decode(o.output_token_ids, skip_special_tokens=True)
                histories[rec.id] = msgs + [{"role": "assistant", "content": answer}]
    acc.wall_s += wall
    acc.num_output_tokens += tokens
    if wall > 0:
        acc.tok_s_repeats.append(tokens / wall)


def collect_output(acc: ArmResult, o: GenOutput) -> None:
    acc.num_requests += 1
    if not o.ok:
        acc.errors.append(f"{o.request_id}: {o.error}")
        return
    acc.outputs.setdefault(o.request_id, o.output_token_ids)
    if o.ttft_s is not None:
        acc.ttft.append(o.ttft_s * 1000)
    if o.itl_s:
        acc.itl += [x * 1000 for x in o.itl_s]
    if o.latency_s and o.ttft_s is not None and len(o.output_token_ids) > 1:
        acc.tpot.append((o.latency_s - o.ttft_s) * 1000 / (len(o.output_token_ids) - 1))
    if o.spec:
        drafts = int(o.spec.get("num_spec_steps") or 0)
        accepted = int(o.spec.get("num_accepted_draft_tokens") or 0)
        acc.per_request.append((accepted, drafts))
        if drafts:
            acc.per_request_al.append(1 + accepted / drafts)


# ----------------------------------------------------------------------------- engines


def warm_up(engine: Engine, prompts: Prompts, recipe: Recipe) -> None:
    n = recipe.bench.warmup_requests
    if n <= 0:
        return
    reqs = [GenRequest(f"warmup-{i}", tuple(prompts[i % len(prompts)][1]), min(16, recipe.bench.max_tokens))
            for i in range(n)]
    engine.generate(reqs, Sampling(), max(recipe.bench.concurrency))


def default_engine_factory(recipe: Recipe, run_dir: Path) -> EngineFactory:
    def make(plan: EnginePlan, name: str) -> Engine:
        kind = recipe.bench.engine
        if kind == "offline":
            from harness.engine.offline import OfflineEngine

            return OfflineEngine(plan, recipe.engine.startup_timeout_s, recipe.engine.request_timeout_s,
                                 log_path=run_dir / "logs" / f"{name}.log")
        if kind == "server":
            from harness.engine.server import ServerEngine

            return ServerEngine(plan, run_dir / "logs" / f"{name}.log", recipe.engine.startup_timeout_s,
                                recipe.engine.request_timeout_s)
        from harness.engine.server import AttachedEngine

        url = recipe.bench.baseline_url if plan.speculative is None else recipe.bench.url
        return AttachedEngine(url, request_timeout_s=recipe.engine.request_timeout_s,
                              setting="bench.baseline_url" if plan.speculative is None else "bench.url")

    return make


# ----------------------------------------------------------------------------- one cell


def measure_cell(run: BenchRun, cell: CellSpec, draft: DraftUnderTest, engines: tuple[Engine, Engine],
                 tokenizer, prompts: Prompts) -> tuple[CellRow, CellRow]:
    """Both arms of a cell, A/B interleaved over the repeats, as the cell's two rows."""
    b = run.recipe.bench
    base_engine, spec_engine = engines
    barm, sarm = ArmResult(), ArmResult()
    sampling = sampling_for(run.recipe, cell.temperature, draft.verifier)
    max_prompt = run.recipe.engine.max_model_len - b.max_tokens
    for r in range(b.repeats):
        order = [(base_engine, barm), (spec_engine, sarm)]
        for eng, arm in order[::-1] if r % 2 else order:
            run_arm(eng, tokenizer, prompts, sampling, b.max_tokens, cell.concurrency, max_prompt, arm)
    suite = run.suites[cell.suite]
    identity = CellIdentity(
        run_id=run.run_dir.name, cell_id=cell.id, draft=draft.label, method=draft.method,
        suite=suite.name, suite_version=suite.version, suite_sha=suite.sha,
        k=cell.k, concurrency=cell.concurrency, temperature=cell.temperature, top_p=b.top_p,
        max_tokens=b.max_tokens, repeats=b.repeats, engine=spec_engine.kind,
        rejection_sample_method=b.rejection_sample_method if cell.temperature > 0 else "greedy",
        verifier_hash=run.verifier_hash[draft.verifier.path],
        draft_hash=(draft.content_hash or {}).get("sha256"))
    return cell_rows(identity, barm, sarm, predicted_al=draft.predicted_al(cell.k),
                     deterministic_verifier=draft.deterministic_verifier,
                     mismatch_tolerance=b.mismatch_tolerance)


def record_cell(run: BenchRun, cell: CellSpec, rows: tuple[CellRow, CellRow]) -> None:
    write_cell(run.run_dir, cell.id, [r.to_dict() for r in rows])
    rs = rows[1]
    for f in rs.flags:
        run.reporter.log(f"[{cell.id}] {f}")
    run.reporter.advance(1, AL=rs.acceptance_length or float("nan"), tok_s=rs.output_tok_per_s or 0.0,
                         speedup=rs.speedup or 0.0)


# ----------------------------------------------------------------------------- the loop


def _by_verifier(drafts: list[DraftUnderTest]) -> Iterator[tuple[VerifierLayout, list[DraftUnderTest]]]:
    layouts = {d.verifier.path: d.verifier for d in drafts}
    for path, layout in layouts.items():
        yield layout, [d for d in drafts if d.verifier.path == path]


def bench_verifier(run: BenchRun, layout: VerifierLayout, drafts: list[DraftUnderTest], todo: list[CellSpec]) -> None:
    """One baseline engine for the verifier; one speculative engine per (draft, k) with cells to run."""
    cells = [c for c in todo if any(c.draft == d.label for d in drafts)]
    if not cells:
        return
    recipe = run.recipe
    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    max_prompt = recipe.engine.max_model_len - recipe.bench.max_tokens
    prompts = {name: render_requests(tok, s, max_prompt) for name, s in run.suites.items()}
    first = next(iter(prompts.values()))
    with run.make_engine(engine_plan(recipe.engine, layout), f"baseline-{Path(layout.path).name}") as base_engine:
        warm_up(base_engine, first, recipe)
        record_engine(run.run_dir, "baseline", base_engine.describe())
        for d in drafts:
            for k in recipe.bench.k:
                kcells = [c for c in cells if c.draft == d.label and c.k == k]
                if not kcells:
                    continue
                spec = SpeculativeSpec(d.method, k, d.path, recipe.bench.rejection_sample_method)
                with run.make_engine(engine_plan(recipe.engine, layout, spec), f"{d.label}-k{k}") as spec_engine:
                    warm_up(spec_engine, first, recipe)
                    record_engine(run.run_dir, f"{d.label}-k{k}", spec_engine.describe())
                    for cell in kcells:
                        rows = measure_cell(run, cell, d, (base_engine, spec_engine), tok, prompts[cell.suite])
                        record_cell(run, cell, rows)


def load_suites(recipe: Recipe) -> list[Suite]:
    b = recipe.bench
    return [load_suite(s, b.num_prompts, b.hf_field_map) for s in b.suites]


def run_bench(recipe: Recipe, drafts: list[DraftUnderTest], run_dir: Path, reporter: Reporter,
              engine_factory: EngineFactory | None = None, resume: bool = False) -> Path:
    """Run (or resume) the matrix; returns the run folder."""
    suites = load_suites(recipe)
    cells = plan_cells(recipe, drafts, suites)
    open_run(run_dir, recipe, resume)
    vhash = {d.verifier.path: verifier_identity(d.verifier.path) for d in drafts}
    start_manifest(run_dir, recipe, [c.id for c in cells], drafts, suites, vhash)
    run = BenchRun(recipe, run_dir, reporter, engine_factory or default_engine_factory(recipe, run_dir),
                   {s.name: s for s in suites}, vhash)
    done = finished_cells(run_dir)
    todo = [c for c in cells if c.id not in done]
    reporter.stage("bench cells", total=len(cells))
    reporter.advance(len(cells) - len(todo))
    with run_status(run_dir, reporter):
        for layout, vdrafts in _by_verifier(drafts):
            bench_verifier(run, layout, vdrafts, todo)
    return run_dir


def new_run_id(recipe: Recipe) -> str:
    return f"{recipe.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
