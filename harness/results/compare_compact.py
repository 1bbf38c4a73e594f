"""`harness compare` by default, the compact form of a comparison (harness/results/compare.py builds
it): one row per cell, a column group per run with AL [CI], speedup [CI] and output tok/s, deltas vs
the first run marked `*` when beyond noise (CIs that do not overlap: harness/analysis/compare_marks.py),
cells of one run only listed at the end, and the crossover concurrency per (draft, suite, k, T) of each
run (harness/results/load_view.py; a run measured at one concurrency reads "one load point", and when no
run spans two, a note replaces the table). Speculative rows only (the baseline arm is inside the
speedup). Runs that differ in verifier, max tokens or suite revision are refused unless forced.
These renderers only format the model: every number and mark was decided by `compare.build`.
"""

from __future__ import annotations

from typing import Any

from harness.analysis import compare_marks as cm
from harness.results import published as pub
from harness.results.compare import Comparison, published_dicts, rich_table
from harness.ui import md_table

ANSWER_TITLE = (
    "which arm to deploy per suite and load: the fastest at its best k, margin over the runner-up "
    "(no speculation included; harness/results/answer.py)"
)


def to_dict(c: Comparison) -> dict[str, Any]:
    """The compact form as JSON (`harness compare --json`): the table's text cells plus the marks."""
    headers, body = cm.table(c.table)
    return {
        "runs": list(c.runs),
        "headers": headers,
        "rows": body,
        "marked": [{"key": list(k), "metric": m, "run": c.runs[i]} for k, m, i in c.table.marked],
        "only_in": [{"key": list(k), "run": r} for k, r in c.table.only_in],
        "crossovers": [{"cell": list(k), "per_run": list(v)} for k, v in c.crossovers.items()],
        "deploy": [
            {"suite": s, "concurrency": n, "temperature": t, "per_run": list(v)} for (s, n, t), v in c.answers.items()
        ],
        "published": published_dicts(c),
        "notes": c.notes(),
    }


def _crossover_rows(c: Comparison) -> tuple[list[str], list[list[str]]]:
    heads = ["draft", "suite", "k", "T", *(f"{r} crossover [95% CI]" for r in c.runs)]
    return heads, [[d, s, str(k), f"{t:g}", *v] for (d, s, k, t), v in c.crossovers.items()]


def _answer_rows(c: Comparison) -> tuple[list[str], list[list[str]]]:
    heads = ["suite", "c", "T", *(f"{r}: deploy" for r in c.runs)]
    return heads, [[s, str(n), f"{t:g}", *v] for (s, n, t), v in c.answers.items()]


def to_rich(c: Comparison):
    from rich.console import Group

    headers, body = cm.table(c.table)
    parts = [
        rich_table(
            f"compare: {len(c.runs)} run(s), deltas vs {c.runs[0]}",
            headers,
            body,
            left=("suite", "draft"),
            caption=cm.LEGEND,
        )
    ]
    heads, rows = _crossover_rows(c)
    if rows:
        parts.append(
            rich_table(
                "crossover concurrency (speedup falls below 1.0x; interpolated in log2 concurrency)",
                heads,
                rows,
                left=heads,
            )
        )
    heads, rows = _answer_rows(c)
    if rows:
        parts.append(rich_table(ANSWER_TITLE, heads, rows, left=heads))
    return parts[0] if len(parts) == 1 else Group(*parts)


def to_markdown(c: Comparison) -> str:
    out = [f"### Compare: deltas vs `{c.runs[0]}`", "", *md_table(*cm.table(c.table)), ""]
    heads, rows = _crossover_rows(c)
    if rows:
        out += ["#### Crossover concurrency (speedup falls below 1.0x)", "", *md_table(heads, rows), ""]
    heads, rows = _answer_rows(c)
    if rows:
        out += [f"#### {ANSWER_TITLE}", "", *md_table(heads, rows), ""]
    if c.published:
        out += [
            "#### Published figures for comparison",
            "",
            f"- {pub.NOTE}",
            "",
            *md_table(["run", *pub.HEADERS], c.published),
            "",
        ]
    out += [f"- {n}" for n in c.notes()] + ["", cm.LEGEND]
    return "\n".join(out) + "\n"
