"""The bench run's table for people (stdout) or machines (--json)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.bench.machine_record import speedup_ci_note
from harness.results.runs import Run
from harness.schema import BASELINE, CellRow
from harness.ui import MISSING, fmt, fmt_ci


def _json_value(v: Any) -> Any:
    """A column's value as JSON has it: NaN and infinities null (as pandas' to_json wrote them)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return [_json_value(x) for x in v] if isinstance(v, list) else v


def render_bench_summary(run_dir: Path, console, as_json: bool = False) -> None:
    from rich.table import Table

    from harness.results.runs import read_run

    run = read_run(run_dir)  # the run, read once: the table and the view lines below
    manifest, missing = run.manifest, run.missing
    spec = [r for r in run.rows if r.is_speculative]
    if as_json:
        rows = [{k: _json_value(v) for k, v in r.to_dict().items()} for r in spec]
        print(
            json.dumps(
                {"run_dir": str(run_dir), "status": manifest.status, "missing_cells": missing, "rows": rows}, indent=2
            )
        )
        return
    base = {r.cell_id: r for r in run.rows if r.mode == BASELINE}
    t = Table(
        title=f"bench {manifest.run_id}  (AL = 1 + accepted/drafts, incl. bonus token; "
        "rate = accepted/draft tokens; speedup = spec tok/s / baseline tok/s; CIs 95 %: AL over "
        "requests, speedup over paired repeats and requests; repeat = share of the verifier's "
        "output repeating an 8-gram)",
        title_justify="left",
    )
    for col in COLUMNS:
        t.add_column(col, justify="right" if col not in ("draft", "suite", "flags", "per-position") else "left")
    for r in sorted(spec, key=lambda r: (r.draft, r.suite, r.k, r.concurrency, r.temperature, r.request_rate)):
        t.add_row(*_cells(r, base.get(r.cell_id)))
    console.print(t)
    _view_lines(run, console)
    note = speedup_ci_note(spec)
    if note:
        console.print(note, highlight=False)
    if missing:
        console.print(
            f"[yellow]{len(missing)} planned cell(s) not measured[/] (run {manifest.status}): "
            + ", ".join(missing[:6])
            + (" ..." if len(missing) > 6 else "")
        )
    console.print(f"results: {run_dir / 'results.parquet'} (+ results.csv, manifest.json)")


COLUMNS = (
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
)


def _cells(r: CellRow, b: CellRow | None) -> list[str]:
    """One speculative row's cells in the table, beside its baseline arm's tok/s."""
    compared = r.lossless_compared
    lossless = f"{int(r.lossless_matches or 0)}/{int(compared)}" if compared is not None else MISSING
    flags = list(r.flags) + ([f"FAILED: {r.error}"] if r.status != "ok" else [])
    rate = f" @{r.request_rate:g}/s" if fmt(r.request_rate) != MISSING and r.request_rate else ""
    return [
        r.draft,
        r.suite,
        str(r.k),
        str(r.concurrency) + rate,
        fmt(r.temperature, "{:g}"),
        fmt(r.acceptance_length, "{:.2f}") + fmt_ci(r.al_ci_low, r.al_ci_high),
        fmt(r.draft_acceptance_rate, "{:.2f}"),
        "/".join(fmt(x, "{:.2f}") for x in r.per_position_rates),
        fmt(b.output_tok_per_s if b is not None else None, "{:.0f}"),
        fmt(r.output_tok_per_s, "{:.0f}"),
        fmt(r.speedup, "{:.2f}x") + fmt_ci(r.speedup_ci_low, r.speedup_ci_high)
        if fmt(r.speedup) != MISSING
        else MISSING,
        fmt(r.repetition_share, "{:.0%}"),
        lossless,
        "[red]" + "; ".join(flags) + "[/]" if flags else "",
    ]


def _view_lines(run: Run, console) -> None:
    """One line per open-loop sweep (saturation and, with bench.slo, the SLO rates and their ratio)
    and per prefix-caching pair (AL per turn with and without the cache, and the flag)."""
    from harness.analysis.slo import bounds_s
    from harness.results.cache_view import cache_pairs, summary_line
    from harness.results.slo_view import rate_lines, rate_text, ratio_text, slo_text

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
