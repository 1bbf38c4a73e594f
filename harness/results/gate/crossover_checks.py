"""The gate's load check: the crossover concurrency (where speedup falls below 1.0x,
harness/analysis/load.py) may not move down by more than a fraction of the baseline's
(docs/gate.md, "The load check"). Pure: evaluate.py calls the check, baseline.py stores the lines.
"""

from __future__ import annotations

from harness.analysis.load import ABOVE, CROSSES, Cross, grid_position
from harness.results import load_view
from harness.results.checks import Check
from harness.schema import CellRow
from harness.schema_baseline import BaselineCrossover

ACROSS = "all"  # a crossover check's concurrency column: it spans the grid


def position(cross: Cross, concurrencies: tuple[int, ...] | list[int]) -> float:
    """Where a crossover sits on the concurrency axis: the interpolated concurrency when it
    crosses, the grid's top when it never falls below 1.0x, 0 when it never pays."""
    return grid_position(cross, max(concurrencies))


def _holds_a_crossover(base: BaselineCrossover) -> bool:
    """Whether a baseline line has a crossover to regress from (it paid, on two or more concurrencies)."""
    return (
        base.where in (CROSSES, ABOVE)
        and base.crossover is not None
        and load_view.enough_load_points(base.concurrencies or [])
    )


def crossover_checks(
    base_lines: list[BaselineCrossover], rows: list[CellRow], max_drop: float, noise_aware: bool = False
) -> tuple[list[Check], list[str]]:
    """One Check per baseline crossover line the run also has (rows: the gated speculative rows).
    Returns (checks, problems): a baseline line without a run line is a problem, as for cells."""
    lines = {(x.suite, x.k, x.temperature): x for x in load_view.crossovers(rows)}
    checks, problems = [], []
    for base in base_lines:
        if not _holds_a_crossover(base):
            continue  # the baseline never paid, or had one load point: nothing to regress from
        key = (base.suite, int(base.k), float(base.temperature))
        line = lines.get(key)
        where = f"{base.suite} k={base.k} T={base.temperature:g}"
        if line is None:
            problems.append(f"{where}: no crossover in the run (no speedup measured at these settings)")
            continue
        c = line.crossover
        if c is None:
            problems.append(
                f"{where}: no crossover in the run: {line.text()}, a crossover needs "
                f"{load_view.MIN_CONCURRENCIES} or more concurrencies (baseline: {base.text})"
            )
            continue
        value = position(c.point, line.concurrencies)
        high = c.high if noise_aware and c.method != "none" else c.point
        compared = position(high, line.concurrencies)
        bound = float(base.crossover or 0.0) * (1 - max_drop)
        passed = compared >= bound
        checks.append(
            Check(
                suite=base.suite,
                k=int(base.k),
                concurrency=ACROSS,
                temperature=float(base.temperature),
                metric="crossover concurrency",
                baseline=base.crossover,
                value=value,
                bound=bound,
                passed=passed,
                compared=compared,
                draft=line.draft,
                detail=f"{line.text()} vs baseline {base.text}: "
                f"{'>=' if passed else '<'} bound {bound:.3g} (baseline × {1 - max_drop:g}"
                f"{'; run CI upper end' if high is not c.point else ''})",
            )
        )
    return checks, problems
