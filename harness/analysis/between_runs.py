"""How much a speedup moves from one bench run to the next, beyond what one run's CI carries.

A cell's speedup CI is a bootstrap over its own requests (and repeats): every request of both arms
ran on the same two engine starts, so the CI carries the spread between prompts but not what changes
from one engine start to the next (memory placement, thread binding, the machine's state). Measured
on a quiet 2-core machine: two back-to-back runs of the same bench read 0.61x [0.61, 0.62] then
0.68x [0.65, 0.71] (issue 52); an untrained draft's requests agree with each other, so its CI
collapses to a point.

Scale: log speedup (a speedup is a ratio; its errors multiply). A 95 % CI [lo, hi] gives the
  within-run standard error se = (ln hi − ln lo) / (2 × 1.96).
Between-run SD tau: from R ≥ 2 independent runs of the same cells, per cell the sample variance of
  ln speedup over runs less the mean within-run se² (method of moments, as in a random-effects
  meta-analysis), pooled over cells by their degrees of freedom (R − 1), floored at 0.
Widened CI: ln point ± 1.96 × sqrt(se² + tau²): the CI of one run, as a rerun would see it.
Rerun agreement: two runs' speedups of a cell agree when |ln s1 − ln s2| ≤ 1.96 × sqrt(se1² + se2²)
  (their combined standard error); the check issue 52 asks to hold in ≥ 90 % of cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Speedup:
    """One run's speedup of a cell with its 95 % CI (None ends: no CI)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def log_se(self) -> float:
        """The within-run standard error of ln speedup, read from the CI (0 without one)."""
        if self.low is None or self.high is None or self.low <= 0 or self.high <= 0:
            return 0.0
        return max(0.0, math.log(self.high) - math.log(self.low)) / (2 * Z95)


@dataclass(frozen=True)
class BetweenRunSD:
    """tau (log scale) with what it rests on: cells with ≥ 2 runs, runs per cell at most."""

    tau: float
    cells: int
    runs: int


def between_run_sd(by_cell: Mapping[str, Sequence[Speedup]]) -> BetweenRunSD | None:
    """Pooled between-run SD of ln speedup over the cells measured in ≥ 2 runs (module docstring);
    None when no cell has two."""
    excess, dof, cells, runs = 0.0, 0, 0, 0
    for reps in by_cell.values():
        reps = [r for r in reps if r.value > 0]
        if len(reps) < 2:
            continue
        logs = [math.log(r.value) for r in reps]
        mean = sum(logs) / len(logs)
        var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
        within = sum(r.log_se**2 for r in reps) / len(reps)
        excess += (len(reps) - 1) * (var - within)
        dof += len(reps) - 1
        cells, runs = cells + 1, max(runs, len(reps))
    if not dof:
        return None
    return BetweenRunSD(math.sqrt(max(0.0, excess / dof)), cells, runs)


def widened(s: Speedup, tau: float, level: float = 0.95) -> Speedup:
    """The CI of `s` with the between-run SD added in quadrature on the log scale (module docstring);
    `level`: the CI's level, kept (a race's looks read theirs at 1 − 0.05/looks, harness/bench/race.py)."""
    if s.value <= 0 or tau <= 0:
        return s
    z = Z95 if level == 0.95 else NormalDist().inv_cdf(0.5 + level / 2)
    half = z * math.sqrt((s.log_se * Z95 / z) ** 2 + tau**2)
    return Speedup(s.value, s.value * math.exp(-half), s.value * math.exp(half))


def rerun_z(a: Speedup, b: Speedup) -> float | None:
    """|ln a − ln b| over their combined standard error; None when neither has a CI."""
    se = math.hypot(a.log_se, b.log_se)
    if a.value <= 0 or b.value <= 0:
        return None
    diff = abs(math.log(a.value) - math.log(b.value))
    if se == 0:
        return math.inf if diff > 0 else 0.0
    return diff / se


def agree(a: Speedup, b: Speedup) -> bool:
    """Two runs' speedups of one cell agree within 1.96 × their combined standard error."""
    z = rerun_z(a, b)
    return z is not None and z <= Z95
