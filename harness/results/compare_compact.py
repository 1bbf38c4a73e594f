"""`harness compare` by default: one row per cell, a column group per run with AL [CI], speedup [CI]
and output tok/s, deltas vs the first run marked `*` when beyond noise (CIs that do not overlap:
harness/analysis/compare_marks.py), cells of one run only listed at the end, and the crossover
concurrency per (draft, suite, k, T) of each run (harness/results/load_view.py; a run measured at
one concurrency reads "one load point", and when no run spans two, a note replaces the table).
Speculative rows only (the baseline arm is inside the speedup). Runs that differ in verifier, max tokens or suite
revision are refused unless forced, as in the long form (harness/results/compare.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.analysis import compare_marks as cm
from harness.results import load_view
from harness.results import published as pub
from harness.results.compare import comparable
from harness.results.runs import Run, is_speculative, read_run


@dataclass(frozen=True)
class CompactResult:
    table: cm.CompactCompare
    crossovers: dict[tuple, tuple[str, ...]]  # (draft, suite, k, T) -> crossover text per run
    missing: dict[str, str] = field(default_factory=dict)
    forced: tuple[str, ...] = ()
    published: tuple[tuple[str, ...], ...] = ()  # published figures matching a cell (results/published.py)
    load_note: str | None = None  # why there is no crossover table (no run spans two concurrencies)

    def notes(self) -> list[str]:
        only = [f"only in {run}: " + " ".join(f"{c}={v}" for c, v in zip(self.table.key_columns, key))
                for key, run in self.table.only_in]
        load = [f"crossover: {self.load_note}"] if self.load_note else []
        return only + load + list(self.missing.values()) + [f"forced (not comparable): {f}" for f in self.forced]

    def to_dict(self) -> dict[str, Any]:
        headers, body = cm.table(self.table)
        return {"runs": list(self.table.runs), "headers": headers, "rows": body,
                "marked": [{"key": list(k), "metric": m, "run": self.table.runs[i]} for k, m, i in self.table.marked],
                "only_in": [{"key": list(k), "run": r} for k, r in self.table.only_in],
                "crossovers": [{"cell": list(k), "per_run": list(v)} for k, v in self.crossovers.items()],
                "published": [dict(zip(["run", *pub.HEADERS], row)) for row in self.published],
                "notes": self.notes()}


def _crossovers(lines: list[list[load_view.CrossoverLine]]) -> dict[tuple, tuple[str, ...]]:
    """(draft, suite, k, T) -> each run's crossover text (lines: each run's); empty when no run has a
    crossover at all (every line one load point: the note says so once instead of a table of it)."""
    if load_view.lines_note([x for ls in lines for x in ls]):
        return {}
    per_run = [{(x.draft, x.suite, x.k, x.temperature): x.text() for x in ls} for ls in lines]
    keys = sorted({k for d in per_run for k in d})
    return {k: tuple(d.get(k, "—") for d in per_run) for k in keys}


def compact_align(runs: list[Run], by: list[str] | None = None, force: bool = False,
                  published: list[pub.Published] | None = None) -> CompactResult:
    """The pure core: align loaded runs' speculative cells, mark deltas beyond noise."""
    labels, cols, _, problems = comparable(runs, by, force)
    key = tuple(c for c in cols if c != "mode")
    table = cm.compact([(lab, [r for r in run.rows if is_speculative(r)]) for run, lab in zip(runs, labels)], key)
    missing = {lab: note for run, lab in zip(runs, labels) if (note := run.incomplete_note())}
    shown = pub.for_runs([(lab, r.rows, r.manifest) for r, lab in zip(runs, labels)], published or [])
    lines = [load_view.crossovers(run.rows) for run in runs]
    return CompactResult(table, _crossovers(lines), missing, tuple(problems), tuple(tuple(r) for r in shown),
                         load_view.lines_note([x for ls in lines for x in ls]))


def compact_runs(runs: list[Path], by: list[str] | None = None, force: bool = False) -> CompactResult:
    return compact_align([read_run(r) for r in runs], by, force, pub.load_published())


def _crossover_rows(res: CompactResult) -> tuple[list[str], list[list[str]]]:
    heads = ["draft", "suite", "k", "T", *(f"{r} crossover [95% CI]" for r in res.table.runs)]
    return heads, [[d, s, str(k), f"{t:g}", *v] for (d, s, k, t), v in res.crossovers.items()]


def to_rich(res: CompactResult):
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table

    headers, body = cm.table(res.table)
    t = Table(title=f"compare: {len(res.table.runs)} run(s), deltas vs {res.table.runs[0]}", caption=escape(cm.LEGEND))
    for h in headers:
        t.add_column(escape(h), justify="left" if h in ("suite", "draft") else "right")
    for row in body:
        t.add_row(*(escape(x) for x in row))
    heads, rows = _crossover_rows(res)
    x = Table(title="crossover concurrency (speedup falls below 1.0x; interpolated in log2 concurrency)")
    for h in heads:
        x.add_column(escape(h))
    for row in rows:
        x.add_row(*(escape(v) for v in row))
    return Group(t, x) if rows else t


def _md_table(headers: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + \
        ["| " + " | ".join(r) + " |" for r in body] + [""]


def to_markdown(res: CompactResult) -> str:
    out = [f"### Compare: deltas vs `{res.table.runs[0]}`", "", *_md_table(*cm.table(res.table))]
    heads, rows = _crossover_rows(res)
    if rows:
        out += ["#### Crossover concurrency (speedup falls below 1.0x)", "", *_md_table(heads, rows)]
    if res.published:
        out += ["#### Published figures for comparison", "", f"- {pub.NOTE}", "",
                *_md_table(["run", *pub.HEADERS], [list(r) for r in res.published])]
    out += [f"- {n}" for n in res.notes()] + ["", cm.LEGEND]
    return "\n".join(out) + "\n"
