"""`harness compare`: several runs side by side, cell by cell, with deltas against the first.

One model, one builder, renderers that only format it:
  `build` (loaded runs) / `compare_runs` (run folders) -> `Comparison`, holding both views of the runs:
    lines      the long form: every metric of every aligned cell (both modes), a value per run, deltas
    table      the compact form (speculative cells): AL, speedup, tok/s with CIs, deltas marked `*`
               beyond noise (the statistics: harness/analysis/compare_marks.py)
    crossovers the crossover concurrency per (draft, suite, k, T), a text per run (results/load_view.py)
    published  published figures matching a cell (results/published.py)
  Renderers: here the long form (`to_rich`, `to_markdown`, `to_csv`, `Comparison.to_dict`, `long_notes`);
  harness/results/compare_compact.py the compact form `harness compare` prints by default.

Cells are aligned on the `by` columns (default suite, k, concurrency, temperature) plus the
mode (baseline / speculative); the draft label joins the key only when a run holds several
drafts, so runs of differently named drafts still line up. Cells measured against a different
verifier, max tokens or suite revision are refused unless `force` (their numbers do not
measure the same thing). Metric definitions: harness/metrics.py.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.analysis import compare_marks as cm
from harness.errors import BadInput
from harness.results import answer, load_view
from harness.results import published as pub
from harness.results.runs import Run, read_run, unique_labels
from harness.schema import COMPARABILITY, SETTING, SPECULATIVE
from harness.ui import MISSING, fmt, md_table

METRICS = (
    "acceptance_length",
    "tokens_per_step",
    "draft_acceptance_rate",
    "output_tok_per_s",
    "speedup",
    "lossless_match_rate",
    "ttft_ms_median",
)
DEFAULT_BY = SETTING[:4]  # request_rate joins when a run has open-loop cells (key_columns)
KEY_CHOICES = (
    *SETTING,
    "draft",
    "method",
    "top_p",
    "max_tokens",
    "suite_version",
    "engine",
    "rejection_sample_method",
)
DIGITS = {"output_tok_per_s": 1, "ttft_ms_median": 1, "speedup": 3}


# ----------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Line:
    """One aligned cell × metric: a value per run (None where the run lacks it) and, per run after the
    first, the delta against the first run and that delta relative to the first run's value."""

    key: tuple
    metric: str
    values: tuple[float | None, ...]
    deltas: tuple[float | None, ...]
    rels: tuple[float | None, ...]

    def delta(self, i: int) -> float | None:
        """Run i's delta (i >= 1: the run's position among all runs)."""
        return self.deltas[i - 1]

    def rel(self, i: int) -> float | None:
        return self.rels[i - 1]


@dataclass(frozen=True)
class Comparison:
    """Several runs compared, the first the reference; every renderer formats this and nothing else."""

    runs: tuple[str, ...]  # unique labels (the same run twice gets #2)
    drafts: tuple[str, ...]  # each run's draft labels, for the headers
    key_columns: tuple[str, ...]  # the long form's key: the `by` columns (+ draft) + mode
    lines: tuple[Line, ...]  # the long form
    table: cm.CompactCompare  # the compact form: speculative cells keyed without mode, deltas marked
    crossovers: dict[tuple, tuple[str, ...]]  # (draft, suite, k, T) -> crossover text per run; {}: see load_note
    load_note: str | None = None  # why there is no crossover table (no run spans two concurrencies)
    missing: dict[str, str] = field(default_factory=dict)  # run label -> what a killed run lacks
    forced: tuple[str, ...] = ()  # incomparabilities overridden by --force
    published: tuple[tuple[str, ...], ...] = ()  # published figures matching a cell, run label first
    # (suite, concurrency, T) -> each run's arm to deploy there, its k, speedup and margin (results/answer.py)
    answers: dict[tuple, tuple[str, ...]] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """What the tables leave out: cells of one run only, why no crossover, what killed runs lack,
        what was forced. (The long table lists one-run cells itself and has no crossovers: `long_notes`.)"""
        only = [
            f"only in {run}: " + " ".join(f"{c}={v}" for c, v in zip(self.table.key_columns, key))
            for key, run in self.table.only_in
        ]
        load = [f"crossover: {self.load_note}"] if self.load_note else []
        return only + load + list(self.missing.values()) + [f"forced (not comparable): {f}" for f in self.forced]

    def to_dict(self) -> dict[str, Any]:
        """The long form as JSON (`harness compare --long --json`)."""
        return {
            "runs": list(self.runs),
            "drafts": list(self.drafts),
            "key_columns": list(self.key_columns),
            "lines": [
                {
                    **dict(zip(self.key_columns, ln.key)),
                    "metric": ln.metric,
                    "values": list(ln.values),
                    "delta": list(ln.deltas),
                    "rel_delta": list(ln.rels),
                }
                for ln in self.lines
            ],
            "missing": self.missing,
            "forced": list(self.forced),
            "published": published_dicts(self),
        }


# ----------------------------------------------------------------------------- alignment


def key_columns(runs: list[Run], by: list[str]) -> tuple[str, ...]:
    unknown = [c for c in by if c not in KEY_CHOICES]
    if unknown:
        raise BadInput(f"--by: unknown column(s) {', '.join(unknown)}; choose from {', '.join(KEY_CHOICES)}")
    cols = list(dict.fromkeys(by))
    if "draft" not in cols and any(len({r.draft for r in run.rows}) > 1 for run in runs):
        cols.append("draft")  # a run with several drafts: the label is needed to tell its cells apart
    if "request_rate" not in cols and any(r.request_rate for run in runs for r in run.rows):
        cols.append("request_rate")  # open-loop cells: one setting per offered rate
    return (*cols, "mode")


def index_rows(run: Run, label: str, cols: tuple[str, ...]) -> dict[tuple, dict[str, Any]]:
    """The run's rows by key, as column mappings: compare reads the columns the user names
    (--by, the metrics), so it works on `CellRow.to_dict()`."""
    return cm.index_rows(
        label,
        [r.to_dict() for r in run.rows],
        cols,
        hint="add the column that tells them apart to --by (e.g. draft, k, concurrency, temperature)",
    )


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
                    found.append(
                        f"{f} differs between runs {ref_label} ({ref.get(f)}) and {label} ({row.get(f)}) at {where}"
                    )
    return found


def comparable(
    runs: list[Run], by: list[str] | None, force: bool
) -> tuple[list[str], tuple[str, ...], list[dict], list[str]]:
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


# ----------------------------------------------------------------------------- the builder


def _lines(indexed: Sequence[dict[tuple, dict]]) -> tuple[Line, ...]:
    """Every metric of every aligned cell that some run has."""
    out = []
    for key in cm.ordered(k for idx in indexed for k in idx):
        for m in METRICS:
            values = tuple(idx[key].get(m) if key in idx else None for idx in indexed)
            if any(v is not None for v in values):
                diffs = [cm.difference(values[0], v) for v in values[1:]]
                out.append(Line(key, m, values, tuple(d for d, _ in diffs), tuple(r for _, r in diffs)))
    return tuple(out)


def _compact(labels: list[str], cols: tuple[str, ...], indexed: Sequence[dict[tuple, dict]]) -> cm.CompactCompare:
    """The speculative cells of the same alignment, keyed without mode (the baseline arm is inside the speedup)."""
    spec = [{k[:-1]: row for k, row in idx.items() if k[-1] == SPECULATIVE} for idx in indexed]  # mode: last column
    return cm.aligned(labels, spec, cols[:-1])


def _crossovers(lines: list[list[load_view.CrossoverLine]]) -> dict[tuple, tuple[str, ...]]:
    """(draft, suite, k, T) -> each run's crossover text (lines: each run's); empty when no run has a
    crossover at all (every line one load point: the note says so once instead of a table of it)."""
    if load_view.lines_note([x for ls in lines for x in ls]):
        return {}
    per_run = [{(x.draft, x.suite, x.k, x.temperature): x.text() for x in ls} for ls in lines]
    keys = sorted({k for d in per_run for k in d})
    return {k: tuple(d.get(k, MISSING) for d in per_run) for k in keys}


def _answers(runs: list[Run]) -> dict[tuple, tuple[str, ...]]:
    """(suite, concurrency, T) -> each run's answer, "arm k=K S.SSx (margin M.MMx, clear)"."""
    per_run = [
        {(a.suite, a.concurrency, a.temperature): answer.short_text(a) for a in answer.answers(r.rows)} for r in runs
    ]
    keys = sorted({k for d in per_run for k in d})
    return {k: tuple(d.get(k, MISSING) for d in per_run) for k in keys}


def build(
    runs: list[Run], by: list[str] | None = None, force: bool = False, published: list[pub.Published] | None = None
) -> Comparison:
    """The one place a comparison is made: align already-loaded runs once, then derive both forms,
    the crossovers and the published figures matching their cells."""
    labels, cols, indexed, problems = comparable(runs, by, force)
    drafts = tuple(", ".join(sorted({str(r.draft) for r in run.rows})) or MISSING for run in runs)
    crossover_lines = [load_view.crossovers(run.rows) for run in runs]
    shown = pub.for_runs([(lab, r.rows, r.manifest) for r, lab in zip(runs, labels)], published or [])
    return Comparison(
        runs=tuple(labels),
        drafts=drafts,
        key_columns=cols,
        lines=_lines(indexed),
        table=_compact(labels, cols, indexed),
        crossovers=_crossovers(crossover_lines),
        load_note=load_view.lines_note([x for ls in crossover_lines for x in ls]),
        missing={lab: note for run, lab in zip(runs, labels) if (note := run.incomplete_note())},
        forced=tuple(problems),
        published=tuple(map(tuple, shown)),
        answers=_answers(runs),
    )


def compare_runs(runs: list[Path], by: list[str] | None = None, force: bool = False) -> Comparison:
    return build([read_run(r) for r in runs], by, force, pub.load_published())


# ----------------------------------------------------------------------------- shared by both forms


def published_dicts(c: Comparison) -> list[dict[str, str]]:
    return [dict(zip(["run", *pub.HEADERS], row)) for row in c.published]


def rich_table(
    title: str, headers: Sequence[str], body: Sequence[Sequence[str]], left: Sequence[str], caption: str | None = None
):
    """A rich table of text cells (escaped: a run label or a cell may hold brackets); `left`: the
    headers justified left, the rest right."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, caption=None if caption is None else escape(caption))
    for h in headers:
        t.add_column(escape(h), justify="left" if h in left else "right")
    for row in body:
        t.add_row(*(escape(x) for x in row))
    return t


# ----------------------------------------------------------------------------- the long form


def long_notes(c: Comparison) -> list[str]:
    return list(c.missing.values()) + [f"forced: {f}" for f in c.forced]


def _cells(c: Comparison, ln: Line) -> list[str]:
    d = DIGITS.get(ln.metric, 3)
    out = [fmt(ln.values[0], d)]
    for i in range(1, len(c.runs)):
        delta, rel = ln.delta(i), ln.rel(i)
        tail = "" if delta is None else "  " + fmt(delta, f"{{:+.{d}f}}") + ("" if rel is None else f" ({rel:+.1%})")
        out.append(fmt(ln.values[i], d) + tail)
    return out


def _headers(c: Comparison) -> list[str]:
    runs = [f"{lab} [{dr}]" for lab, dr in zip(c.runs, c.drafts)]
    return [*c.key_columns, "metric", runs[0], *(f"{r} Δ vs first" for r in runs[1:])]


def _body(c: Comparison) -> list[list[str]]:
    return [[*cm.key_cells(ln.key), ln.metric, *_cells(c, ln)] for ln in c.lines]


def to_rich(c: Comparison):
    return rich_table(
        f"compare: {len(c.runs)} run(s), deltas vs {c.runs[0]}",
        _headers(c),
        _body(c),
        left=("suite", "mode", "metric", "draft"),
        caption="definitions: harness/metrics.py (AL = 1 + accepted/drafts, incl. bonus token)",
    )


def to_markdown(c: Comparison) -> str:
    out = [f"### Compare: deltas vs `{c.runs[0]}`", "", *md_table(_headers(c), _body(c))]
    out += [""] + [f"- {n}" for n in long_notes(c)]
    if c.published:
        out += [
            "",
            "### Published figures for comparison",
            "",
            f"- {pub.NOTE}",
            "",
            *md_table(["run", *pub.HEADERS], c.published),
        ]
    out.append(
        "\nDefinitions: `harness/metrics.py` — AL = 1 + accepted/drafts (pooled, incl. the bonus "
        "token); draft acceptance rate = accepted/draft tokens; speedup = spec ÷ baseline output tok/s."
    )
    return "\n".join(out) + "\n"


def to_csv(c: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            *c.key_columns,
            "metric",
            *c.runs,
            *(f"{r}_delta" for r in c.runs[1:]),
            *(f"{r}_rel_delta" for r in c.runs[1:]),
        ]
    )
    for ln in c.lines:
        w.writerow([*ln.key, ln.metric, *("" if v is None else v for v in (*ln.values, *ln.deltas, *ln.rels))])
    return buf.getvalue()
