"""`harness compare`: several runs side by side, cell by cell, with deltas against the first.

Cells are aligned on the `by` columns (default suite, k, concurrency, temperature) plus the
mode (baseline / speculative); the draft label joins the key only when a run holds several
drafts, so runs of differently named drafts still line up. Cells measured against a different
verifier, max tokens or suite revision are refused unless `force` (their numbers do not
measure the same thing). Metric definitions: harness/metrics.py.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.results import published as pub
from harness.results.runs import COMPARABILITY, Run, fmt, read_run, unique_labels

METRICS = ("acceptance_length", "draft_acceptance_rate", "output_tok_per_s", "speedup",
           "lossless_match_rate", "ttft_ms_median")
DEFAULT_BY = ("suite", "k", "concurrency", "temperature")
KEY_CHOICES = ("suite", "k", "concurrency", "temperature", "draft", "method", "top_p", "max_tokens",
               "suite_version", "engine", "rejection_sample_method")
DIGITS = {"output_tok_per_s": 1, "ttft_ms_median": 1, "speedup": 3}


@dataclass(frozen=True)
class Line:
    """One aligned cell × metric: a value per run (None where the run lacks it)."""

    key: tuple
    metric: str
    values: tuple[float | None, ...]

    def delta(self, i: int) -> float | None:
        a, b = self.values[0], self.values[i]
        return None if a is None or b is None else b - a

    def rel(self, i: int) -> float | None:
        d, a = self.delta(i), self.values[0]
        return None if d is None or not a else d / a


@dataclass(frozen=True)
class CompareResult:
    runs: tuple[str, ...]
    drafts: tuple[str, ...]  # each run's draft labels, for the headers
    key_columns: tuple[str, ...]
    lines: tuple[Line, ...]
    missing: dict[str, str] = field(default_factory=dict)  # run label -> what a killed run lacks
    forced: tuple[str, ...] = ()  # incomparabilities overridden by --force
    published: tuple[tuple[str, ...], ...] = ()  # published figures matching a cell (results/published.py)

    def notes(self) -> list[str]:
        return list(self.missing.values()) + [f"forced: {f}" for f in self.forced]

    def to_dict(self) -> dict[str, Any]:
        return {"runs": list(self.runs), "drafts": list(self.drafts), "key_columns": list(self.key_columns),
                "lines": [{**dict(zip(self.key_columns, ln.key)), "metric": ln.metric, "values": list(ln.values),
                           "delta": [ln.delta(i) for i in range(1, len(self.runs))],
                           "rel_delta": [ln.rel(i) for i in range(1, len(self.runs))]} for ln in self.lines],
                "missing": self.missing, "forced": list(self.forced),
                "published": [dict(zip(["run", *pub.HEADERS], row)) for row in self.published]}


def key_columns(runs: list[Run], by: list[str]) -> tuple[str, ...]:
    unknown = [c for c in by if c not in KEY_CHOICES]
    if unknown:
        raise BadInput(f"--by: unknown column(s) {', '.join(unknown)}; choose from {', '.join(KEY_CHOICES)}")
    cols = list(dict.fromkeys(by))
    if "draft" not in cols and any(len({r.get("draft") for r in run.rows}) > 1 for run in runs):
        cols.append("draft")  # a run with several drafts: the label is needed to tell its cells apart
    return (*cols, "mode")


def index_rows(run: Run, label: str, cols: tuple[str, ...]) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for row in run.rows:
        key = tuple(row.get(c) for c in cols)
        if key in out:
            raise BadInput(f"run {label}: several rows share {dict(zip(cols, key))}; add the column that tells "
                           f"them apart to --by (e.g. draft, k, concurrency, temperature)")
        out[key] = row
    return out


def incomparabilities(indexed: list[dict[tuple, dict]], labels: list[str], cols: tuple[str, ...]) -> list[str]:
    """Each aligned cell whose COMPARABILITY fields differ from the first run holding it."""
    found = []
    for key in dict.fromkeys(k for idx in indexed for k in idx):
        holders = [(labels[i], idx[key]) for i, idx in enumerate(indexed) if key in idx]
        (ref_label, ref), others = holders[0], holders[1:]
        for label, row in others:
            for f in COMPARABILITY:
                if row.get(f) != ref.get(f):
                    where = " ".join(f"{c}={v}" for c, v in zip(cols, key))
                    found.append(f"{f} differs between runs {ref_label} ({ref.get(f)}) and {label} "
                                 f"({row.get(f)}) at {where}")
    return found


def comparable(runs: list[Run], by: list[str] | None, force: bool
               ) -> tuple[list[str], list[str], list[dict], list[str]]:
    """(labels, key columns, rows indexed by key per run, problems); refuses incomparable cells
    unless forced (the problems are then listed as forced)."""
    if not runs:
        raise BadInput("compare needs at least one run")
    labels = unique_labels(runs)
    cols = key_columns(runs, list(by or DEFAULT_BY))
    indexed = [index_rows(r, lab, cols) for r, lab in zip(runs, labels)]
    problems = incomparabilities(indexed, labels, cols)
    if problems and not force:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(f"cells are not comparable: {problems[0]}{more}; pass --force to align them anyway")
    return labels, cols, indexed, problems


def align(runs: list[Run], by: list[str] | None = None, force: bool = False,
          published: list[pub.Published] | None = None) -> CompareResult:
    """The pure core: align already-loaded runs (and list the published figures matching their cells)."""
    labels, cols, indexed, problems = comparable(runs, by, force)
    keys = list(dict.fromkeys(k for idx in indexed for k in idx))
    keys.sort(key=lambda k: tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in k))
    lines = []
    for key in keys:
        for m in METRICS:
            values = tuple(idx[key].get(m) if key in idx else None for idx in indexed)
            if any(v is not None for v in values):
                lines.append(Line(key, m, values))
    drafts = tuple(", ".join(sorted({str(r.get("draft")) for r in run.rows})) or "—" for run in runs)
    missing = {lab: note for run, lab in zip(runs, labels) if (note := run.incomplete_note())}
    shown = pub.for_runs([(lab, r.rows, r.manifest) for r, lab in zip(runs, labels)], published or [])
    return CompareResult(tuple(labels), drafts, cols, tuple(lines), missing, tuple(problems),
                         tuple(map(tuple, shown)))


def compare_runs(runs: list[Path], by: list[str] | None = None, force: bool = False) -> CompareResult:
    return align([read_run(r) for r in runs], by, force, pub.load_published())


# ----------------------------------------------------------------------------- renderers


def _cells(result: CompareResult, ln: Line) -> list[str]:
    d = DIGITS.get(ln.metric, 3)
    out = [fmt(ln.values[0], d)]
    for i in range(1, len(result.runs)):
        v, delta, rel = ln.values[i], ln.delta(i), ln.rel(i)
        tail = "" if delta is None else f"  {delta:+.{d}f}" + ("" if rel is None else f" ({rel:+.1%})")
        out.append(fmt(v, d) + tail)
    return out


def _headers(result: CompareResult) -> list[str]:
    runs = [f"{lab} [{dr}]" for lab, dr in zip(result.runs, result.drafts)]
    return [*result.key_columns, "metric", runs[0], *(f"{r} Δ vs first" for r in runs[1:])]


def _key_cells(ln: Line) -> list[str]:
    return [fmt(v) if not isinstance(v, float) else f"{v:g}" for v in ln.key]


def to_rich(result: CompareResult):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"compare: {len(result.runs)} run(s), deltas vs {result.runs[0]}",
              caption="definitions: harness/metrics.py (AL = 1 + accepted/drafts, incl. bonus token)")
    for h in _headers(result):
        t.add_column(escape(h), justify="right" if h not in ("suite", "mode", "metric", "draft") else "left")
    for ln in result.lines:
        t.add_row(*(escape(x) for x in [*_key_cells(ln), ln.metric, *_cells(result, ln)]))
    return t


def to_markdown(result: CompareResult) -> str:
    heads = _headers(result)
    out = [f"### Compare: deltas vs `{result.runs[0]}`", "",
           "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    out += ["| " + " | ".join([*_key_cells(ln), ln.metric, *_cells(result, ln)]) + " |" for ln in result.lines]
    out += [""] + [f"- {n}" for n in result.notes()]
    if result.published:
        heads = ["run", *pub.HEADERS]
        out += ["", "### Published figures for comparison", "", f"- {pub.NOTE}", "",
                "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        out += ["| " + " | ".join(row) + " |" for row in result.published]
    out.append("\nDefinitions: `harness/metrics.py` — AL = 1 + accepted/drafts (pooled, incl. the bonus "
               "token); draft acceptance rate = accepted/draft tokens; speedup = spec ÷ baseline output tok/s.")
    return "\n".join(out) + "\n"


def to_csv(result: CompareResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    runs = result.runs
    w.writerow([*result.key_columns, "metric", *runs,
                *(f"{r}_delta" for r in runs[1:]), *(f"{r}_rel_delta" for r in runs[1:])])
    for ln in result.lines:
        n = range(1, len(runs))
        w.writerow([*ln.key, ln.metric, *("" if v is None else v for v in ln.values),
                    *("" if ln.delta(i) is None else ln.delta(i) for i in n),
                    *("" if ln.rel(i) is None else ln.rel(i) for i in n)])
    return buf.getvalue()
