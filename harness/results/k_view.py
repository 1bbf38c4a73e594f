"""Speedup at every k of a run with bench.k_from_one_engine and bench.k_measured: per (draft, suite,
concurrency, temperature, rate), the measured ks' cells fix the step-cost line
(harness/analysis/k_speedup.py) and the largest k's cell carries tokens per step at every smaller k
(its breakdowns.k). The best k per load follows, with the ks the intervals cannot tell from it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from harness.analysis.k_speedup import KEstimate, MeasuredK, best_k, speedup_by_k
from harness.schema import CellRow
from harness.ui import fmt

HEADERS = ["draft", "suite", "concurrency", "T", "best k (estimated)", "not told apart from it", "speedup by k"]


@dataclass(frozen=True)
class KGroup:
    row: CellRow  # the largest k's cell (its identity columns name the group)
    estimates: tuple[KEstimate, ...]


def _measured(r: CellRow) -> MeasuredK | None:
    tps = r.tokens_per_step or r.acceptance_length
    if tps is None or r.speedup is None:
        return None
    low = r.speedup if r.speedup_ci_low is None else r.speedup_ci_low
    high = r.speedup if r.speedup_ci_high is None else r.speedup_ci_high
    return MeasuredK(r.k, tps, r.speedup, low, high)


def k_groups(spec_rows: list[CellRow]) -> list[KGroup]:
    """Every group whose largest-k cell carries AL by k and whose measured ks are two or more."""
    groups: dict[tuple, list[CellRow]] = defaultdict(list)
    for r in spec_rows:
        groups[(r.draft, r.suite, r.concurrency, float(r.temperature), float(r.request_rate or 0.0))].append(r)
    out = []
    for rows in groups.values():
        top = max(rows, key=lambda r: r.k)
        if not top.breakdowns.k:
            continue
        measured = [m for r in rows if (m := _measured(r)) is not None]
        tps = {k: v for k, v in enumerate(top.breakdowns.k.als, start=1) if v is not None}
        if est := speedup_by_k(measured, tps):
            out.append(KGroup(top, tuple(est)))
    return out


def table_rows(groups: list[KGroup]) -> list[list[str]]:
    out = []
    for g in groups:
        best = best_k(g.estimates)
        if best is None:
            continue
        r = g.row
        by_k = "; ".join(
            f"k={e.k}{'' if e.measured else '~'} {fmt(e.speedup)} [{fmt(e.speedup_low)}, {fmt(e.speedup_high)}]"
            for e in g.estimates
        )
        out.append(
            [
                r.draft,
                r.suite,
                str(r.concurrency),
                f"{r.temperature:g}",
                str(best[0]),
                ", ".join(map(str, best[1])) or "—",
                by_k,
            ]
        )
    return out
