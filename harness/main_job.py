"""`harness train-and-bench`: recipe -> draft -> bench -> report -> gate -> verdict.

One run folder holds everything, so an interrupted run resumes where it stopped when the same
command is run again (the run id is derived from the recipe):

  results/runs/<recipe>-<fingerprint>/
    train/            the training run (stages, checkpoints, draft/, train_report.json)
    manifest.json     the bench run (provenance, planned cells, status)
    cells/ results.parquet results.csv
    report/           report.md, report.html, PNG plots
    gate/             gate.md, junit.xml (when the recipe names a baseline)
    summary.json      the closing summary
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import Regression
from harness.provenance import atomic_write_json
from harness.recipe import REPO_ROOT, Recipe
from harness.ui import Reporter


@dataclass
class MainJobResult:
    run_dir: Path
    summary_rows: list[dict[str, Any]]
    paths: dict[str, str]
    wall_s: float
    gate_exit: int | None = None
    notes: list[str] = field(default_factory=list)
    train_report: dict[str, Any] = field(default_factory=dict)


def default_run_dir(recipe: Recipe) -> Path:
    return REPO_ROOT / "results" / "runs" / f"{recipe.name}-{recipe.fingerprint()[:8]}"


def _summary_rows(run_dir: Path, gate_result) -> list[dict[str, Any]]:
    from harness.results.table import load_run

    _, df, _ = load_run(run_dir)
    if not len(df):
        return []
    spec = df[df["mode"] == "speculative"]
    verdict: dict[str, str] = {}
    if gate_result is not None:
        for c in gate_result.checks:
            suite = c.suite
            verdict[suite] = "FAIL" if (not c.passed or verdict.get(suite) == "FAIL") else "pass"
    rows = []
    for (draft, suite), g in spec.groupby(["draft", "suite"], sort=False):
        acc = int(g["num_accepted_tokens"].sum())
        drafts = int(g["num_drafts"].sum())
        dtok = int(g["num_draft_tokens"].sum())
        rows.append({
            "draft": draft, "suite": suite, "cells": len(g),
            "acceptance_length": (1 + acc / drafts) if drafts else None,
            "draft_acceptance_rate": (acc / dtok) if dtok else None,
            "speedup_median": float(g["speedup"].median()) if g["speedup"].notna().any() else None,
            "speedup_min": float(g["speedup"].min()) if g["speedup"].notna().any() else None,
            "gate": verdict.get(suite, "-") if draft == "draft" else "-",
        })
    return rows


def run_train_and_bench(recipe: Recipe, reporter: Reporter, run_dir: Path | None = None,
                        base: Path | None = None) -> MainJobResult:
    from harness.bench.run import resolve_drafts, run_bench
    from harness.results.table import MANIFEST, ensure_tables
    from harness.train.pipeline import resolve_verifier, run_train

    t0 = time.perf_counter()
    run_dir = run_dir or default_run_dir(recipe)
    run_dir.mkdir(parents=True, exist_ok=True)
    trained = run_train(recipe, run_dir / "train", reporter, base)
    layout = resolve_verifier(recipe, reporter)
    drafts = resolve_drafts(recipe, layout, trained.draft_dir, label="draft")
    run_bench(recipe, drafts, run_dir, reporter, base=base, resume=(run_dir / MANIFEST).is_file())
    ensure_tables(run_dir)  # a rerun with every cell already finished writes no cell, so no table

    from harness.results.report import write_report

    reporter.stage("report", total=None)
    report_paths = write_report(run_dir, run_dir / "report")
    reporter.done()
    paths = {"run": str(run_dir), "draft": str(trained.draft_dir), "train_report": str(run_dir / "train" / "train_report.json"),
             "results": str(run_dir / "results.parquet"), "results_csv": str(run_dir / "results.csv")}
    paths.update(report_markdown=str(report_paths.markdown), report_html=str(report_paths.html))
    gate_result, gate_exit, notes = None, None, []
    baseline = Path(recipe.gate.baseline) if recipe.gate.baseline else None  # '' = no gate
    if baseline is not None and not baseline.is_absolute():
        baseline = REPO_ROOT / baseline
    if baseline is not None and (baseline / "baseline.json").is_file():
        from harness.results import gate as gate_mod

        gate_result = gate_mod.gate(run_dir, baseline, tolerance=recipe.gate.tolerance,
                                    min_speedup=recipe.gate.min_speedup, noise_aware=recipe.gate.noise_aware,
                                    draft="draft")
        gate_dir = run_dir / "gate"
        gate_dir.mkdir(exist_ok=True)
        (gate_dir / "gate.md").write_text(gate_mod.to_markdown(gate_result))
        (gate_dir / "junit.xml").write_text(gate_mod.to_junit(gate_result))
        paths.update(gate_markdown=str(gate_dir / "gate.md"), gate_junit=str(gate_dir / "junit.xml"))
        gate_exit = gate_result.exit_code
    elif baseline is not None:
        notes.append(f"no baseline at {baseline}: create one with `harness gate {run_dir} --baseline {baseline} --update-baseline`")
    rows = _summary_rows(run_dir, gate_result)
    result = MainJobResult(run_dir, rows, paths, time.perf_counter() - t0, gate_exit, notes, trained.report)
    atomic_write_json(run_dir / "summary.json", {"rows": rows, "paths": paths, "wall_s": result.wall_s,
                                                 "gate_exit": gate_exit, "notes": notes,
                                                 "train_report": trained.report})
    return result


def render_summary(res: MainJobResult, console) -> None:
    from rich.table import Table

    def f(v, fmt="{:.2f}"):
        return "-" if v is None else fmt.format(v)

    t = Table(title="train-and-bench summary  (AL = 1 + accepted/drafts incl. bonus token, pooled per suite; "
                    "rate = accepted/draft tokens; speedup = spec/baseline output tok/s per cell)", title_justify="left")
    for c in ("draft", "suite", "cells", "AL", "accept rate", "speedup (median)", "speedup (min)", "gate"):
        t.add_column(c, justify="left" if c in ("draft", "suite", "gate") else "right")
    for r in res.summary_rows:
        gate = r["gate"]
        t.add_row(r["draft"], r["suite"], str(r["cells"]), f(r["acceptance_length"]), f(r["draft_acceptance_rate"]),
                  f(r["speedup_median"], "{:.2f}x"), f(r["speedup_min"], "{:.2f}x"),
                  "[red]FAIL[/]" if gate == "FAIL" else gate)
    console.print(t)
    tr = res.train_report
    if tr:
        console.print(
            f"training: {f(tr.get('train_wall_s'), '{:.0f}')} s, {tr.get('train_tokens') or 0:,} tokens, "
            f"{f(tr.get('train_tok_per_s'), '{:.0f}')} tokens/s; predicted AL {f(tr.get('predicted_acceptance_length'))} "
            f"(1 + held-out full accuracy per TTT step); train/serve agreement {f(tr.get('agreement'), '{:.3f}')}")
    for k, v in res.paths.items():
        console.print(f"  {k:14s} {v}")
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}")
    console.print(f"wall time {res.wall_s:.0f} s")


def exit_for(res: MainJobResult) -> None:
    if res.gate_exit == 1:
        raise Regression("the acceptance gate found a regression (see the gate table above and "
                         f"{res.paths.get('gate_markdown')})")



