"""A run's rows seen under load: the crossover concurrency per (draft, suite, k, temperature) and
the best k per concurrency as vLLM's `num_speculative_tokens_per_batch_size` schedule.
Definitions: harness/analysis/load.py (crossover interpolated in log2(concurrency); its CI from
the speedup CIs' bounds; best k = highest output tok/s, k = 0 = the baseline arm)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from harness.analysis import load
from harness.results.runs import BASELINE, is_speculative

Row = dict[str, Any]
DYNAMIC_SUFFIX = "-dynamic"  # harness/bench/dynamic.py labels the schedule's arm so


@dataclass(frozen=True)
class CrossoverLine:
    draft: str
    suite: str
    k: int
    temperature: float
    concurrencies: tuple[int, ...]
    crossover: load.Crossover

    def text(self) -> str:
        c = self.crossover
        ci = "" if c.method == "none" else f" [{c.low}, {c.high}]"
        return f"{c.point}{ci}"


@dataclass(frozen=True)
class Schedule:
    draft: str
    suite: str
    temperature: float
    best: dict[int, int]  # concurrency -> k (0: no speculation)
    ranges: list[tuple[int, int, int]]
    snippet: str


def crossovers(rows: list[Row]) -> list[CrossoverLine]:
    """One line per (draft, suite, k, T) with a speedup at >= 1 concurrency."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if is_speculative(r) and r.get("speedup") is not None:
            groups[(str(r.get("draft")), str(r["suite"]), int(r["k"]), float(r["temperature"]))].append(r)
    out = []
    for (draft, suite, k, t), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["concurrency"])
        est = [load.Estimate(r["speedup"], r.get("speedup_ci_low"), r.get("speedup_ci_high")) for r in rs]
        concs = tuple(int(r["concurrency"]) for r in rs)
        out.append(CrossoverLine(draft, suite, k, t, concs, load.crossover_from_bounds(concs, est)))
    return out


def _tok_s_by_k(rows: list[Row]) -> dict[tuple, dict[tuple[int, int], float]]:
    """(draft, suite, T) -> {(k, concurrency): output tok/s}; k = 0 is the baseline arm (mean of its cells)."""
    spec: dict[tuple, dict[tuple[int, int], float]] = defaultdict(dict)
    base: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        v = r.get("output_tok_per_s")
        if v is None or r.get("status", "ok") != "ok":
            continue
        key = (str(r.get("draft")), str(r["suite"]), float(r["temperature"]))
        if r.get("mode") == BASELINE:
            base[key][int(r["concurrency"])].append(v)
        elif is_speculative(r):
            spec[key][(int(r["k"]), int(r["concurrency"]))] = v
    for key, per_c in base.items():
        for c, vs in per_c.items():
            spec[key][(0, c)] = sum(vs) / len(vs)
    return spec


def schedules(rows: list[Row], source: str) -> list[Schedule]:
    """Best k per concurrency per (draft, suite, T), as a vLLM schedule and a recipe snippet."""
    out = []
    for (draft, suite, t), tok_s in sorted(_tok_s_by_k(rows).items()):
        if draft.endswith(DYNAMIC_SUFFIX) or not any(k for k, _ in tok_s):
            continue
        best = load.best_k(tok_s)
        out.append(Schedule(draft, suite, t, best, load.batch_size_schedule(best),
                            load.recipe_snippet(best, f"{source} ({draft}, {suite}, T={t:g})",
                                                table="speculative_config",
                                                key="num_speculative_tokens_per_batch_size")))
    return out


def _estimate(r: Row) -> load.Estimate:
    return load.Estimate(r.get("speedup"), r.get("speedup_ci_low"), r.get("speedup_ci_high"))


def dynamic_verdicts(rows: list[Row]) -> list[tuple[str, str, float, list[load.DynamicVerdict]]]:
    """Per (draft, suite, T) with a dynamic arm: does it match or beat every fixed k at each
    concurrency within noise (speedup CIs; analysis/load.dynamic_vs_fixed)."""
    spec = [r for r in rows if is_speculative(r) and r.get("speedup") is not None]
    out = []
    for dyn_draft in sorted({str(r.get("draft")) for r in spec if str(r.get("draft")).endswith(DYNAMIC_SUFFIX)}):
        draft = dyn_draft.removesuffix(DYNAMIC_SUFFIX)
        for suite, t in sorted({(r["suite"], r["temperature"]) for r in spec if r.get("draft") == dyn_draft}):
            same = [r for r in spec if r["suite"] == suite and r["temperature"] == t]
            dynamic = {int(r["concurrency"]): _estimate(r) for r in same if r.get("draft") == dyn_draft}
            fixed = {(int(r["k"]), int(r["concurrency"])): _estimate(r) for r in same if r.get("draft") == draft}
            out.append((draft, str(suite), float(t), load.dynamic_vs_fixed(dynamic, fixed)))
    return out
