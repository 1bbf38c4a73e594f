"""`harness train-and-bench`: recipe -> draft -> bench -> report -> gate -> verdict.

One run folder holds everything, so an interrupted run resumes where it stopped when the same
command is run again (the run id is derived from the recipe):

  results/runs/<recipe>-<fingerprint>/
    train/            the training run (stages, checkpoints, draft/, train_report.json)
    manifest.json     the bench run (provenance, planned cells, status)
    cells/ results.parquet results.csv
    report/           report.md, report.html, PNG plots
    gate/             gate.md, junit.xml, gate.json (when the recipe names a baseline)
    summary.json      the closing summary
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import metrics
from harness.bench.machine_record import speedup_ci_note
from harness.engine.counters import SpecCounters
from harness.errors import Regression
from harness.paths import RUNS_DIR
from harness.provenance import atomic_write_json
from harness.recipe import Recipe
from harness.results.answer import HEADERS
from harness.results.runs import Run
from harness.schema import CSV_FILE, TABLE_FILE, CellRow
from harness.schema_requests import RequestRecord
from harness.train.records import TrainReport
from harness.ui import MISSING, Reporter, fmt, fmt_ci


@dataclass
class MainJobResult:
    run_dir: Path
    summary_rows: list[dict[str, Any]]
    paths: dict[str, str]
    wall_s: float
    gate_exit: int | None = None
    notes: list[str] = field(default_factory=list)
    train_report: TrainReport | None = None
    # Where the time went: (stage, seconds) in order, and each bench engine's startup seconds.
    stage_s: list[tuple[str, float]] = field(default_factory=list)
    engine_startup_s: dict[str, float] = field(default_factory=dict)
    # which arm to deploy per suite and load (harness/results/answer.py HEADERS), text rows
    deploy: list[list[str]] = field(default_factory=list)
    not_weighed: list[str] = field(default_factory=list)  # methods this device cannot serve, with why
    raced: list[str] = field(default_factory=list)  # bench.race: each setting's arms and where they left it


def _engine_startups(run: Run) -> dict[str, float]:
    engines = run.manifest.data.get("engines") or {}
    return {name: e["startup_s"] for name, e in engines.items() if e.get("startup_s") is not None}


def _deploy(run: Run) -> tuple[list[list[str]], list[str], list[str]]:
    """The answer table's rows, the methods it could not weigh on this device, and its races (bench.race)."""
    from harness.results.answer import answer_rows, not_weighed, race_notes

    return answer_rows(run.rows), not_weighed(run.manifest.hardware.device), race_notes(run.rows)


def default_run_dir(recipe: Recipe) -> Path:
    return RUNS_DIR / f"{recipe.name}-{recipe.fingerprint()[:8]}"


def _gate_verdicts(gate_result) -> dict[str, str]:
    """Per suite: FAIL, inconclusive (a paired cell not settled, or a stored-number AL check that
    cannot see the tolerance) or pass."""
    rank = {"pass": 0, "inconclusive": 1, "FAIL": 2}
    verdict: dict[str, str] = {}

    def add(suite: str, v: str) -> None:
        verdict[suite] = max(verdict.get(suite, "pass"), v, key=rank.__getitem__)

    for c in gate_result.checks if gate_result is not None else ():
        add(c.suite, "FAIL" if not c.passed else "inconclusive" if c.power_warning else "pass")
    for p in gate_result.paired if gate_result is not None else ():
        add(p.suite, "FAIL" if p.verdict == "fail" else p.verdict)
    return verdict


def _summary_rows(run: Run, gate_result, end_think_id: int | None = None) -> list[dict[str, Any]]:
    """Per (draft, suite): counters pooled over the suite's cells, then the metrics.py formulas."""
    verdict = _gate_verdicts(gate_result)
    spec = [r for r in run.rows if r.is_speculative]
    # The ngram reference per suite: how much the workload repeats itself (a draft's figure over
    # it is what the draft adds beyond copying from the context). Two ratios, because ngram's AL
    # counts only the steps where it found a match (metrics.tokens_per_step).
    ngram = {
        suite: (metrics.acceptance_length(_pooled(g)), _per_step(g))
        for (suite,), g in _groups([r for r in spec if r.method == "ngram"], ("suite",)).items()
    }
    rows = []
    for (draft, suite), g in _groups(spec, ("draft", "suite")).items():
        al, speedups = metrics.acceptance_length(_pooled(g)), _nums(r.speedup for r in g)
        tps, (ngram_al, ngram_tps) = _per_step(g), ngram.get(suite, (None, None))
        rows.append(
            {
                "draft": draft,
                "suite": suite,
                "cells": len(g),
                "acceptance_length": al,
                "draft_acceptance_rate": metrics.draft_acceptance_rate(_pooled(g)),
                "speedup_median": float(np.median(speedups)) if speedups else None,
                "speedup_min": float(min(speedups)) if speedups else None,
                "repetition_share": _repetition_share(g),
                "tokens_per_step": tps,
                "ngram_al": ngram_al,
                "ngram_tokens_per_step": ngram_tps,
                "al_by_segment": _pooled_segments(run.path, g, end_think_id),
                "al_over_ngram": _ratio(al, ngram_al),
                "tokens_per_step_over_ngram": _ratio(tps, ngram_tps),
                "gate": verdict.get(suite, MISSING) if draft == "draft" else MISSING,
            }
        )
    return rows


def _groups(rows: list[CellRow], by: tuple[str, ...]) -> dict[tuple, list[CellRow]]:
    """The rows by the values of `by`, groups in order of first appearance (pandas' sort=False)."""
    out: dict[tuple, list[CellRow]] = {}
    for r in rows:
        out.setdefault(tuple(getattr(r, c) for c in by), []).append(r)
    return out


def _nums(values: Iterable[float | None]) -> list[float]:
    """The values that are numbers (pandas' dropna: no None, no NaN)."""
    return [v for v in values if v is not None and not math.isnan(v)]


def _pooled(g: list[CellRow]) -> SpecCounters:
    return SpecCounters(
        sum(r.num_drafts for r in g), sum(r.num_draft_tokens for r in g), sum(r.num_accepted_tokens for r in g)
    )


def _per_step(g: list[CellRow]) -> float | None:
    """tokens_per_step pooled over cells (each cell's own steps); None for folders without it."""
    if any(r.num_verify_steps is None for r in g):
        return None
    steps = sum(r.num_verify_steps or 0 for r in g)
    pairs = [(r.tokens_per_step, r.num_verify_steps or 0) for r in g]
    weighted = [0.0 if t is None or math.isnan(t) else t * n for t, n in pairs]  # a missing figure adds 0 (pandas)
    return float(np.sum(np.array(weighted, dtype=np.float64)) / steps) if steps else None


def _repetition_share(g: list[CellRow]) -> float | None:
    """The verifier's repetition over the suite's cells, weighted by their output tokens."""
    rep = [(x, r.num_output_tokens) for r in g if (x := r.repetition_share) is not None and not math.isnan(x)]
    tokens = sum(n for _, n in rep)
    return float(np.sum(np.array([x * n for x, n in rep], dtype=np.float64)) / tokens) if tokens else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _pooled_segments(run_dir: Path, g: list[CellRow], end_think_id: int | None) -> dict[str, list[float | None]]:
    """AL per thinking/answer segment over a suite's cells, [AL, CI low, CI high]: every step of
    the suite's speculative requests (their per-step records, cells/requests/), pooled and
    bootstrapped over requests the way each cell's own segment columns are (harness/analysis/steps.py)."""
    from harness.analysis import steps
    from harness.bench.breakdown import request_steps
    from harness.results.table import load_cell_requests

    if end_think_id is None or not any(r.breakdowns.segment for r in g):
        return {}
    records = [
        RequestRecord.from_dict(x)
        for r in g
        for x in (load_cell_requests(run_dir, r.cell_id) or {}).get("speculative", [])
    ]
    reqs = request_steps(records, end_think_id)
    if not reqs or any(r.answer_start is None for r in reqs):
        return {}
    return {
        s.label: [s.acceptance_length, *(s.ci or (None, None))]
        for s in steps.by_segment(reqs, k=max(r.k for r in g))
        if s.acceptance_length is not None
    }


def _end_think_id(layout, recipe: Recipe) -> int | None:
    from harness.bench.cell import end_think_id
    from harness.draft.verifier import load_tokenizer

    return end_think_id(load_tokenizer(layout, recipe.engine.trust_remote_code))


def _baseline_folder(recipe: Recipe, run: Run, notes: list[str]) -> Path | None:
    """The recipe's stored baseline folder when it can gate this run, else None with a note saying why."""
    from harness.results.gate.baseline import find_baseline_dir, other_verifier_only

    if not recipe.gate.baseline:  # '' = no stored baseline
        return None
    folder = find_baseline_dir(recipe.gate.baseline)
    # the main job's own draft is labelled "draft"; its reference drafts share the cells
    create = f"`harness gate {run.path} --baseline {recipe.gate.baseline} --update-baseline --draft draft`"
    if folder is None:
        notes.append(f"no baseline at {recipe.gate.baseline}: create one with {create}")
        return None
    if (other := other_verifier_only(folder, run)) is not None:
        # e.g. the CPU stand-in pretrained in float32 where the CPU emulates bf16 (harness/hardware.py)
        notes.append(
            f"not gated: the baseline at {recipe.gate.baseline} holds cells of {other}, none of this run's "
            f"verifier; add this verifier's with {create} (the other verifiers' cells are kept)"
        )
        return None
    return folder


def _run_gate(recipe: Recipe, run: Run, paths: dict[str, str], notes: list[str]):
    """Gate the run against the recipe's baseline (stored numbers, and paired against the baseline's
    draft when gate.baseline_draft ran beside it), writing gate.md, junit.xml and gate.json (the
    verdict the report reads); None without either."""
    from harness.results.gate.baseline import gate_run
    from harness.results.gate.evaluate import GateOptions
    from harness.results.gate.render import paired_line, write_gate_files

    folder = _baseline_folder(recipe, run, notes)
    if folder is None and not recipe.gate.baseline_draft:
        return None
    # the main job trains one draft, labelled "draft" (reference drafts in the same run are not gated)
    result = gate_run(run, folder, GateOptions.from_recipe(recipe.gate, draft="draft"))
    notes += [f"gate power: {w}" for w in result.power_warnings]
    notes += [f"gate: {result.summary()}", f"gate {paired_line(result)}"]
    notes += [f"gate paired: {c.where}: {e.line()}" for c in result.paired for e in c.estimates[:1]]
    gate_dir = run.path / "gate"
    write_gate_files(result, gate_dir / "gate.md", gate_dir / "junit.xml", gate_dir / "gate.json")
    paths.update(gate_markdown=str(gate_dir / "gate.md"), gate_junit=str(gate_dir / "junit.xml"))
    return result


def run_train_and_bench(recipe: Recipe, reporter: Reporter, run_dir: Path | None = None) -> MainJobResult:
    from harness.bench.loop import run_bench
    from harness.bench.one_at_a_time import refuse_what_one_at_a_time_cannot_run
    from harness.bench.planning import check_prompts_fit
    from harness.cluster import engine_schedule
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.engine.settings import refuse_what_vllm_cannot_run
    from harness.results.report import write_run_report
    from harness.results.runs import read_run
    from harness.results.table import MANIFEST
    from harness.train.health import act_on_health
    from harness.train.pipeline import run_train

    t0 = time.perf_counter()
    # what vLLM cannot serve, and suites that collide or do not fit the context, stop the job now,
    # not after hours of training
    layout = resolve_verifier(recipe, reporter)
    refuse_what_vllm_cannot_run(recipe.engine, layout, recipe.bench.method)
    check_prompts_fit(recipe, layout)
    refuse_what_one_at_a_time_cannot_run(recipe)
    run_dir = run_dir or default_run_dir(recipe)
    run_dir.mkdir(parents=True, exist_ok=True)
    # The bench's speculative engine starts while its baseline engine is up: one more host, its
    # vLLM imported during the responses stage (harness/engine/offline.py prespawn). Not when the
    # engines run one at a time: each reuses the host the last one closed.
    side_by_side = engine_schedule(recipe) == "side_by_side"
    spare = 1 if recipe.bench.engine == "offline" and recipe.engine.device == "cpu" and side_by_side else 0
    trained = run_train(recipe, run_dir / "train", reporter, spare_hosts=spare)
    # judged before any bench engine starts: "stop" ends the job here, the draft kept
    unhealthy = act_on_health(recipe, trained.report.health, trained.draft_dir, reporter.log)
    drafts = resolve_drafts(recipe, trained.layout, trained.draft_dir, label="draft")
    run_bench(
        recipe, drafts, run_dir, reporter, resume=(run_dir / MANIFEST).is_file()
    )  # and its tables, even on a rerun with nothing left to run
    run = read_run(run_dir)  # the finished run, read once: gate, report and summary all use it
    reporter.stage("report", total=None)
    paths = {
        "run": str(run_dir),
        "draft": str(trained.draft_dir),
        "train_report": str(run_dir / "train" / "train_report.json"),
        "results": str(run_dir / TABLE_FILE),
        "results_csv": str(run_dir / CSV_FILE),
    }
    notes: list[str] = [unhealthy] if unhealthy else []
    ci_note = speedup_ci_note([r for r in run.rows if r.is_speculative])
    notes += [ci_note] if ci_note else []
    gate_result = _run_gate(recipe, run, paths, notes)  # first: the report's verdict shows it
    report_paths = write_run_report(run, run_dir / "report")
    paths.update(report_markdown=str(report_paths.markdown), report_html=str(report_paths.html))
    reporter.done()
    gate_exit = gate_result.exit_code if gate_result is not None else None
    rows = _summary_rows(run, gate_result, _end_think_id(trained.layout, recipe))
    result = MainJobResult(
        run_dir,
        rows,
        paths,
        time.perf_counter() - t0,
        gate_exit,
        notes,
        trained.report,
        [(n, round(s, 1)) for n, s in reporter.timings],
        _engine_startups(run),
        *_deploy(run),
    )
    atomic_write_json(
        run_dir / "summary.json",
        {
            "rows": rows,
            "paths": paths,
            "wall_s": result.wall_s,
            "gate_exit": gate_exit,
            "notes": notes,
            "train_report": trained.report.to_dict(),
            "stage_s": result.stage_s,
            "engine_startup_s": result.engine_startup_s,
            "deploy": [dict(zip(HEADERS, r)) for r in result.deploy],
            "not_weighed": result.not_weighed,
            "raced": result.raced,
        },
    )
    return result


def _summary_table(summary_rows: list[dict[str, Any]]):
    """The per (draft, suite) table: AL, tok/step, segments, repetition, vs ngram, speedup, gate."""
    from rich.table import Table

    with_ngram = any(r.get("ngram_al") is not None for r in summary_rows)
    t = Table(
        title="train-and-bench summary  (AL = 1 + accepted/drafts incl. bonus token, pooled per suite; "
        "rate = accepted/draft tokens; speedup = spec/baseline output tok/s per cell; repeat = share "
        "of the verifier's output tokens repeating an 8-gram of its context: how much the workload "
        "loops; tok/step = AL over every decode step, undrafted ones included"
        + (
            "; vs ngram = AL ÷ the ngram reference's AL · tok/step ÷ its tok/step on the suite (ngram's AL "
            "counts only the steps where it found a match; tok/step counts them all)"
            if with_ngram
            else ""
        )
        + ")",
        title_justify="left",
    )
    with_segments = any(r.get("al_by_segment") for r in summary_rows)
    cols = [
        "draft",
        "suite",
        "cells",
        "AL",
        *(["AL think / answer"] if with_segments else []),
        "tok/step",
        "accept rate",
        "repeat",
        *(["vs ngram"] if with_ngram else []),
        "speedup (median)",
        "speedup (min)",
        "gate",
    ]
    for c in cols:
        t.add_column(c, justify="left" if c in ("draft", "suite", "gate") else "right")
    for r in summary_rows:
        gate = r["gate"]
        vs = (
            [f"{fmt(r.get('al_over_ngram'), '{:.2f}x')} · {fmt(r.get('tokens_per_step_over_ngram'), '{:.2f}x')}"]
            if with_ngram
            else []
        )
        seg = r.get("al_by_segment") or {}
        segs = [" / ".join(_al_ci(seg.get(s)) for s in ("thinking", "answer"))] if with_segments else []
        t.add_row(
            r["draft"],
            r["suite"],
            str(r["cells"]),
            fmt(r["acceptance_length"], "{:.2f}"),
            *segs,
            fmt(r.get("tokens_per_step"), "{:.2f}"),
            fmt(r["draft_acceptance_rate"], "{:.2f}"),
            fmt(r.get("repetition_share"), "{:.0%}"),
            *vs,
            fmt(r["speedup_median"], "{:.2f}x"),
            fmt(r["speedup_min"], "{:.2f}x"),
            "[red]FAIL[/]" if gate == "FAIL" else gate,
        )
    return t


def render_summary(res: MainJobResult, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(_summary_table(res.summary_rows))
    if res.deploy:
        d = Table(
            title="which arm to deploy, per suite and load (the fastest at its best k, no speculation included; "
            "margin = its speedup ÷ the runner-up's, clear when their 95% CIs do not overlap)",
            title_justify="left",
        )
        for c in HEADERS:
            d.add_column(c, justify="right" if c in ("c", "T", "k", "AL") else "left")
        for row in res.deploy:
            d.add_row(*row)
        console.print(d)
        for line in res.not_weighed:
            console.print(f"  not weighed on this device: {line}")
        for line in res.raced:
            console.print(f"  raced: {line}")
    tr = res.train_report
    if tr:
        console.print(
            f"training: {fmt(tr.train_wall_s, '{:.0f}')} s, {tr.train_tokens or 0:,} tokens, "
            f"{fmt(tr.train_tok_per_s, '{:.0f}')} tokens/s; "
            f"predicted AL {fmt(tr.predicted_acceptance_length, '{:.2f}')} "
            f"(1 + held-out full accuracy per TTT step); train/serve agreement {fmt(tr.agreement, '{:.3f}')}"
        )
        if tr.health is not None:
            console.print(("[yellow]" if not tr.health.healthy else "") + escape(tr.health.line()), highlight=False)
    for k, v in res.paths.items():
        console.print(f"  {k:14s} {v}")
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}")
    if res.stage_s:
        console.print(
            "time by stage: "
            + " · ".join(f"{n} {s:.0f} s" for n, s in res.stage_s)
            + (
                "  (bench engine startups: "
                + ", ".join(f"{n} {s:.0f} s" for n, s in res.engine_startup_s.items())
                + ")"
                if res.engine_startup_s
                else ""
            )
        )
    console.print(f"wall time {res.wall_s:.0f} s")


def _al_ci(v: list[float | None] | None) -> str:
    """'3.98 [3.93, 4.00]': a segment's pooled AL and its 95 % CI over requests."""
    if not v:
        return MISSING
    al, lo, hi = v
    return fmt(al, "{:.2f}") + fmt_ci(lo, hi)


def exit_for(res: MainJobResult) -> None:
    if res.gate_exit == 1:
        raise Regression(
            f"the acceptance gate found a regression (see the gate table above and {res.paths.get('gate_markdown')})"
        )
