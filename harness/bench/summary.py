"""The bench run's table for people (stdout) or machines (--json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.ui import fmt


def _num(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _with_ci(r, col: str, low: str, high: str, spec: str = "{:.2f}") -> str:
    ci = f" [{fmt(r.get(low), spec)}-{fmt(r.get(high), spec)}]" if _num(r.get(low)) and _num(r.get(high)) else ""
    return fmt(r.get(col), spec) + ci


def render_bench_summary(run_dir: Path, console, as_json: bool = False) -> None:
    from rich.table import Table

    from harness.results.table import load_run

    manifest, df, missing = load_run(run_dir)
    spec = df[df["mode"] == "speculative"] if len(df) else df
    if as_json:
        print(
            json.dumps(
                {
                    "run_dir": str(run_dir),
                    "status": manifest.status,
                    "missing_cells": missing,
                    "rows": json.loads(spec.to_json(orient="records")),
                },
                indent=2,
            )
        )
        return
    base = df[df["mode"] == "baseline"].set_index("cell_id") if len(df) else df
    t = Table(
        title=f"bench {manifest.run_id}  (AL = 1 + accepted/drafts, incl. bonus token; "
        "rate = accepted/draft tokens; speedup = spec tok/s / baseline tok/s; CIs 95 %: AL over "
        "requests, speedup over paired repeats and requests; repeat = share of the verifier's "
        "output repeating an 8-gram)",
        title_justify="left",
    )
    for col in (
        "draft",
        "suite",
        "k",
        "conc",
        "T",
        "AL [95% CI]",
        "rate",
        "per-position",
        "base tok/s",
        "spec tok/s",
        "speedup [95% CI]",
        "repeat",
        "lossless",
        "flags",
    ):
        t.add_column(col, justify="right" if col not in ("draft", "suite", "flags", "per-position") else "left")
    order = [c for c in ("draft", "suite", "k", "concurrency", "temperature", "request_rate") if c in spec.columns]
    for _, r in (spec.sort_values(order, kind="stable") if len(spec) else spec).iterrows():
        b = base.loc[r["cell_id"]] if r["cell_id"] in base.index else None
        lossless = (
            f"{int(r['lossless_matches'])}/{int(r['lossless_compared'])}" if _num(r.get("lossless_compared")) else "-"
        )
        flags = list(r["flags"]) + ([f"FAILED: {r['error']}"] if r["status"] != "ok" else [])
        t.add_row(
            r["draft"],
            r["suite"],
            str(r["k"]),
            str(r["concurrency"])
            + (f" @{r['request_rate']:g}/s" if _num(r.get("request_rate")) and r["request_rate"] else ""),
            fmt(r["temperature"], "{:g}"),
            _with_ci(r, "acceptance_length", "al_ci_low", "al_ci_high"),
            fmt(r["draft_acceptance_rate"], "{:.2f}"),
            "/".join(fmt(x, "{:.2f}") for x in r["per_position_rates"]),
            fmt(b["output_tok_per_s"] if b is not None else None, "{:.0f}"),
            fmt(r["output_tok_per_s"], "{:.0f}"),
            _with_ci(r, "speedup", "speedup_ci_low", "speedup_ci_high", "{:.2f}") + "x"
            if _num(r.get("speedup"))
            else "-",
            fmt(r.get("repetition_share"), "{:.0%}"),
            lossless,
            "[red]" + "; ".join(flags) + "[/]" if flags else "",
        )
    console.print(t)
    _view_lines(run_dir, console)
    if missing:
        console.print(
            f"[yellow]{len(missing)} planned cell(s) not measured[/] (run {manifest.status}): "
            + ", ".join(missing[:6])
            + (" ..." if len(missing) > 6 else "")
        )
    console.print(f"results: {run_dir / 'results.parquet'} (+ results.csv, manifest.json)")


def _view_lines(run_dir: Path, console) -> None:
    """One line per open-loop sweep (saturation and, with bench.slo, the SLO rates and their ratio)
    and per prefix-caching pair (AL per turn with and without the cache, and the flag)."""
    from harness.analysis.slo import bounds_s
    from harness.results.cache_view import cache_pairs, summary_line
    from harness.results.runs import read_run
    from harness.results.slo_view import rate_lines, rate_text, ratio_text, slo_text

    run = read_run(run_dir)
    for pair in cache_pairs(run):
        console.print(summary_line(pair), style="yellow" if pair.flag else None, highlight=False)
    bounds = bounds_s(run.manifest.slo or {})
    for x in rate_lines(run):
        line = (
            f"open loop {x.key}, offered {', '.join(f'{r:g}' for r in x.rates)}/s: saturation baseline "
            f"{x.saturation_baseline or 'none'} / speculative {x.saturation_speculative or 'none'}"
        )
        if x.slo is not None:
            top = max(x.rates)
            line += (
                f"; SLO ({slo_text(bounds)}) rate baseline {rate_text(x.slo.baseline, top)}, speculative "
                f"{rate_text(x.slo.speculative, top)}, ratio {ratio_text(x.slo)}"
            )
        console.print(line, highlight=False)
