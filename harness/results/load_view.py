"""A run's rows seen under load: the crossover concurrency per (draft, suite, k, temperature) and
the best k per concurrency as vLLM's `num_speculative_tokens_per_batch_size` schedule.
Definitions: harness/analysis/load.py (crossover interpolated in log2(concurrency); its CI from
the speedup CIs' bounds; best k = highest output tok/s, k = 0 = the baseline arm).

What the data supports (the one place the report, compare and the gate ask):
  a crossover or a best-k schedule needs at least two distinct concurrencies: from one, "above
  the grid" and a schedule [[1, c, k]] would be extrapolations of a single point; such a line
  reads "one load point (c=…)" instead. An AL-vs-k plot needs at least two distinct k."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.analysis import load
from harness.results.runs import closed_loop
from harness.schema import BASELINE, DYNAMIC_SUFFIX, CellRow

Row = CellRow
MIN_CONCURRENCIES = 2  # a crossover or schedule is a trend across load: one point has none
MIN_KS = 2  # an AL-vs-k line needs two k to be a line
ONE_LOAD_POINT = "one load point"


# ----------------------------------------------------------------------------- what the data supports


def enough_load_points(concurrencies: Iterable[int]) -> bool:
    """A crossover or a best-k schedule needs >= MIN_CONCURRENCIES distinct concurrencies."""
    return len(set(concurrencies)) >= MIN_CONCURRENCIES


def enough_ks(ks: Iterable[int]) -> bool:
    """An AL-vs-k plot needs >= MIN_KS distinct k."""
    return len(set(ks)) >= MIN_KS


def one_load_point(concurrencies: Iterable[int]) -> str:
    """What a line from a single concurrency reads instead of a crossover."""
    return f"{ONE_LOAD_POINT} (c={', '.join(map(str, sorted(set(concurrencies))))})"


def load_note(rows: list[Row]) -> str | None:
    """One sentence when no (draft, suite, k, T) of the rows spans two concurrencies (so there is
    no crossover and no schedule to show); None when one does, or when nothing has a speedup."""
    return lines_note(crossovers(rows))


def lines_note(lines: list[CrossoverLine]) -> str | None:
    """load_note over crossover lines (e.g. several runs' lines together)."""
    if not lines or any(x.crossover is not None for x in lines):
        return None
    concs = {c for x in lines for c in x.concurrencies}
    return (
        f"{one_load_point(concs)}: no crossover concurrency and no best-k schedule; both need speedups at "
        f"{MIN_CONCURRENCIES} or more concurrencies"
    )


# ----------------------------------------------------------------------------- crossover, schedule


@dataclass(frozen=True)
class CrossoverLine:
    draft: str
    suite: str
    k: int
    temperature: float
    concurrencies: tuple[int, ...]
    crossover: load.Crossover | None  # None: one load point (enough_load_points)

    def text(self) -> str:
        c = self.crossover
        if c is None:
            return one_load_point(self.concurrencies)
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
    """One line per (draft, suite, k, T) with a speedup at >= 1 concurrency; its crossover is None
    from a single concurrency."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in closed_loop(rows):
        if r.is_speculative and r.speedup is not None:
            groups[(str(r.draft), str(r.suite), int(r.k), float(r.temperature))].append(r)
    out = []
    for (draft, suite, k, t), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r.concurrency)
        est = [load.Estimate(r.speedup, r.speedup_ci_low, r.speedup_ci_high) for r in rs]
        concs = tuple(int(r.concurrency) for r in rs)
        cross = load.crossover_from_bounds(concs, est) if enough_load_points(concs) else None
        out.append(CrossoverLine(draft, suite, k, t, concs, cross))
    return out


def _tok_s_by_k(rows: list[Row]) -> dict[tuple, dict[tuple[int, int], float]]:
    """(draft, suite, T) -> {(k, concurrency): output tok/s}; k = 0 is the baseline arm (mean of its cells)."""
    spec: dict[tuple, dict[tuple[int, int], float]] = defaultdict(dict)
    base: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in closed_loop(rows):
        v = r.output_tok_per_s
        if v is None or not r.ok:
            continue
        key = (str(r.draft), str(r.suite), float(r.temperature))
        if r.mode == BASELINE:
            base[key][int(r.concurrency)].append(v)
        elif r.is_speculative:
            spec[key][(int(r.k), int(r.concurrency))] = v
    for key, per_c in base.items():
        for c, vs in per_c.items():
            spec[key][(0, c)] = sum(vs) / len(vs)
    return spec


def schedules(rows: list[Row], source: str) -> list[Schedule]:
    """Best k per concurrency per (draft, suite, T), as a vLLM schedule and a recipe snippet; none
    from a single concurrency (vLLM would carry that one k to every batch size: an extrapolation)."""
    out = []
    for (draft, suite, t), tok_s in sorted(_tok_s_by_k(rows).items()):
        if draft.endswith(DYNAMIC_SUFFIX) or not any(k for k, _ in tok_s):
            continue
        if not enough_load_points(c for k, c in tok_s if k):
            continue
        best = load.best_k(tok_s)
        out.append(
            Schedule(
                draft,
                suite,
                t,
                best,
                load.batch_size_schedule(best),
                load.recipe_snippet(
                    best,
                    f"{source} ({draft}, {suite}, T={t:g})",
                    table="speculative_config",
                    key="num_speculative_tokens_per_batch_size",
                ),
            )
        )
    return out


def _estimate(r: Row) -> load.Estimate:
    return load.Estimate(r.speedup, r.speedup_ci_low, r.speedup_ci_high)


def dynamic_verdicts(rows: list[Row]) -> list[tuple[str, str, float, list[load.DynamicVerdict]]]:
    """Per (draft, suite, T) with a dynamic arm: does it match or beat every fixed k at each
    concurrency within noise (speedup CIs; analysis/load.dynamic_vs_fixed)."""
    spec = [r for r in closed_loop(rows) if r.is_speculative and r.speedup is not None]
    out = []
    for dyn_draft in sorted({str(r.draft) for r in spec if str(r.draft).endswith(DYNAMIC_SUFFIX)}):
        draft = dyn_draft.removesuffix(DYNAMIC_SUFFIX)
        for suite, t in sorted({(r.suite, r.temperature) for r in spec if r.draft == dyn_draft}):
            same = [r for r in spec if r.suite == suite and r.temperature == t]
            dynamic = {int(r.concurrency): _estimate(r) for r in same if r.draft == dyn_draft}
            fixed = {(int(r.k), int(r.concurrency)): _estimate(r) for r in same if r.draft == draft}
            out.append((draft, str(suite), float(t), load.dynamic_vs_fixed(dynamic, fixed)))
    return out
