"""A run's prefix-caching pairs (bench.prefix_caching): each speculative cell of a `<suite>@nocache`
suite beside its twin with caching on (same draft, suite, k, concurrency, T, rate), per turn index
AL with and without the cache, the paired CI of the difference, the prefix cache's hit rate in
each, and the flag where caching changes acceptance (harness/analysis/caching.py). The CIs read the
per-request records of the cells' side files (cells/requests/)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis import caching
from harness.results.runs import Run
from harness.results.table import load_cell_requests
from harness.schema import CellRow
from harness.suites import NOCACHE_SUFFIX
from harness.ui import fmt, fmt_ci

SUFFIX = "@" + NOCACHE_SUFFIX


@dataclass(frozen=True)
class CachePair:
    on: CellRow
    off: CellRow
    turns: tuple[caching.TurnDiff, ...]

    @property
    def key(self) -> str:
        r = self.on
        rate = f" @{r.request_rate:g}/s" if r.request_rate else ""
        return f"{r.draft} · {r.suite} k={r.k} c={r.concurrency} T={r.temperature:g}{rate}"

    @property
    def flag(self) -> str | None:
        return caching.cache_flag(self.turns)


def _setting(r: CellRow) -> tuple:
    return (r.draft, r.k, r.concurrency, float(r.temperature), float(r.request_rate or 0.0))


def cache_pairs(run: Run) -> list[CachePair]:
    spec = [r for r in run.rows if r.is_speculative]
    on = {(str(r.suite), *_setting(r)): r for r in spec if not str(r.suite).endswith(SUFFIX)}
    out = []
    for off in spec:
        twin = (
            on.get((str(off.suite).removesuffix(SUFFIX), *_setting(off))) if str(off.suite).endswith(SUFFIX) else None
        )
        if twin is None:
            continue
        on_recs, off_recs = (
            (load_cell_requests(run.path, r.cell_id) or {}).get("speculative", []) for r in (twin, off)
        )
        out.append(CachePair(twin, off, tuple(caching.turn_diffs(on_recs, off_recs))))
    return out


HEADERS = [
    "turn",
    "conversations",
    "AL cached",
    "AL not cached",
    "difference [95% CI]",
    "hit rate cached / not",
    "speedup cached / not",
]


def table_rows(p: CachePair) -> list[list[str]]:
    def at(values: list[float | None] | None, t: int, spec: str) -> str:
        return fmt(values[t] if values and t < len(values) else None, spec)

    def diff(d: caching.TurnDiff) -> str:
        lo, hi = d.ci or (None, None)
        return f"{d.diff:+.2f}" + fmt_ci(lo, hi, "{:+.2f}")

    return [
        [
            str(d.turn + 1),
            str(d.conversations),
            f"{d.al_on:.2f}",
            f"{d.al_off:.2f}",
            diff(d),
            f"{at(p.on.prefix_cache_hit_rate_by_turn, d.turn, '{:.0%}')} / "
            f"{at(p.off.prefix_cache_hit_rate_by_turn, d.turn, '{:.0%}')}",
            f"{at(p.on.speedup_by_turn, d.turn, '{:.2f}')} / {at(p.off.speedup_by_turn, d.turn, '{:.2f}')}",
        ]
        for d in p.turns
    ]


def summary_line(p: CachePair) -> str:
    """One line per pair for the bench summary."""
    per_turn = ", ".join(f"turn {d.turn + 1} {d.al_on:.2f} vs {d.al_off:.2f}" for d in p.turns)
    return f"prefix caching on vs off · {p.key}: AL {per_turn}; " + (p.flag or "no turn's AL differs beyond its CI")
