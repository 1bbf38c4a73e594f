"""Acceptance drift over a soak (`harness soak`): does AL move with serving time?

Public reports (vLLM issue 41838) describe EAGLE acceptance decaying over hours of serving with
prefix caching on, until a restart. A soak holds a steady load and records AL per time window; the
trend test here says whether it drifts.

  windows      (t_i, AL_i): t_i the window's middle in hours of soak time, AL_i its pooled AL
               (1 + accepted / drafts over the window's verify steps)
  slope        ordinary least squares of AL on t, in AL per hour (scipy.stats.linregress)
  CI           the OLS slope's t interval: se = sqrt(Σ residual² / (n − 2) / Σ (t_i − t̄)²), n − 2
               degrees of freedom. A window's AL carries its own sampling noise, which the residuals
               include; windows are taken as independent (each its own requests)
  flag         ACCEPTANCE DRIFT when the CI excludes 0 and the fitted change over the soak
               (|slope| x hours) is at least PRACTICAL_CHANGE of the mean AL: a long soak makes a
               tiny slope significant, which is not worth a page

At least MIN_WINDOWS windows are needed for a verdict (two degrees of freedom and one to spare).
Pure functions; the soak (harness/soak.py) feeds them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DRIFT = "ACCEPTANCE DRIFT"
MIN_WINDOWS = 4
PRACTICAL_CHANGE = 0.02


@dataclass(frozen=True)
class Trend:
    slope_per_h: float
    ci: tuple[float, float]
    windows: int
    hours: float  # from the first window's middle to the last's
    mean: float
    first: float  # fitted AL at the first and the last window
    last: float

    @property
    def drifting(self) -> bool:
        excludes_zero = self.ci[0] > 0 or self.ci[1] < 0
        return excludes_zero and abs(self.slope_per_h) * self.hours >= PRACTICAL_CHANGE * self.mean


def trend(times_h: Sequence[float], values: Sequence[float], level: float = 0.95) -> Trend | None:
    """The OLS trend of `values` over `times_h` with its CI (scipy.stats.linregress's slope and its
    standard error); None with fewer than MIN_WINDOWS windows or no spread in time."""
    from scipy.stats import linregress  # imported here: scipy.stats takes about a second
    from scipy.stats import t as student_t

    pairs = [(float(t), float(v)) for t, v in zip(times_h, values, strict=True) if v is not None and math.isfinite(v)]
    n = len(pairs)
    if n < MIN_WINDOWS or len({t for t, _ in pairs}) < 2:
        return None
    ts, vs = zip(*pairs, strict=True)
    fit = linregress(ts, vs)
    se = float(fit.stderr) if math.isfinite(fit.stderr) else 0.0  # nan where every value is the same: no residual
    half = float(student_t.ppf(0.5 + level / 2, n - 2)) * se
    slope, t0, t1 = float(fit.slope), ts[0], ts[-1]
    return Trend(
        slope,
        (slope - half, slope + half),
        n,
        t1 - t0,
        sum(vs) / n,
        float(fit.intercept) + slope * t0,
        float(fit.intercept) + slope * t1,
    )


def describe(tr: Trend | None, what: str = "AL", spec: str = ".3f") -> str:
    """The verdict line: the flag with the slope and its CI, or why not. `what`: the series
    (AL flags ACCEPTANCE DRIFT; another series reads "<what> drift"), `spec` its number format."""
    if tr is None:
        return f"no {what} drift verdict: fewer than {MIN_WINDOWS} windows (run longer or use shorter windows)"

    def f(v: float) -> str:
        return format(v, "+" + spec)

    body = (
        f"{what} {f(tr.slope_per_h)}/h [95% CI {f(tr.ci[0])}, {f(tr.ci[1])}] over {tr.windows} windows, "
        f"{tr.hours * 60:.1f} min (fitted {format(tr.first, spec)} -> {format(tr.last, spec)})"
    )
    if tr.drifting:
        return f"{DRIFT if what == 'AL' else what + ' DRIFT'}: {body}"
    why = (
        "the CI includes 0"
        if tr.ci[0] <= 0 <= tr.ci[1]
        else f"the fitted change is under {PRACTICAL_CHANGE:.0%} of the mean"
    )
    return f"no {'acceptance' if what == 'AL' else what} drift ({why}): {body}"
