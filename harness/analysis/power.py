"""What a gated cell can detect (issue 14): the smallest AL drop its number of requests can see.

A one-sided test of "AL dropped" at confidence c (false-alarm rate 1 − c) with power p (chance of
catching a drop of that size) detects an absolute drop δ when
    δ >= (z_c + z_p) · SE,           z_q = the standard normal quantile at q,
so the minimum detectable relative drop is
    MDD = (z_c + z_p) · SE / AL      (a fraction, compared with the gate's tolerance).
Defaults c = 0.95, p = 0.80: z sum 1.645 + 0.842 = 2.486. The noise-aware gate (gate.py) fails
when the CI's upper end of a two-sided 95 % CI is below the bound: one-sided 97.5 %, so pass
confidence=NOISE_AWARE_CONFIDENCE to match it exactly.

SE = standard error of the cell's pooled AL, the request being the unit (as in the bootstrap CI):
  from per-request counts (accepted a_i, drafts d_i; R = Σa / Σd, AL = 1 + R), the linearised
      SE of a ratio estimator:  SE = sqrt(Σ (a_i − R·d_i)² / (n (n − 1))) / mean(d);
  from per-request AL values only: SE = sd(AL_i) / sqrt(n), the SE of their mean (scipy.stats.sem);
  from a bootstrap CI (low, high) at level L: SE = (high − low) / (2 · z_{(1+L)/2}).
The gate holds a run against a stored baseline value; when the baseline is itself an estimate
pass its SE as baseline_se, and the difference's SE = sqrt(SE² + baseline_se²).

z_q is scipy.stats.norm.ppf(q) (imported where first used: scipy.stats takes about a second).

Prompts needed to detect a relative drop t: SE scales as 1/sqrt(n) (the baseline's too, when it
is measured on as many prompts), so  n_needed = ceil(n · (MDD / t)²).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import BadInput

CONFIDENCE, POWER = 0.95, 0.80
NOISE_AWARE_CONFIDENCE = 0.975  # gate.py's noise-aware check: upper end of a two-sided 95 % CI


def z(q: float) -> float:
    """The standard normal quantile at q."""
    from scipy.stats import norm

    return float(norm.ppf(q))


def se_from_counts(per_request_accepted: Sequence[int], per_request_drafts: Sequence[int]) -> tuple[float, float, int]:
    """(pooled AL, its SE, requests) from per-request counts; requests without drafts left out."""
    pairs = [(a, d) for a, d in zip(per_request_accepted, per_request_drafts, strict=True) if d > 0]
    n = len(pairs)
    if n < 2:
        raise BadInput(f"power needs per-request counts of >= 2 requests with drafts, got {n}")
    r = sum(a for a, _ in pairs) / sum(d for _, d in pairs)
    mean_d = sum(d for _, d in pairs) / n
    se = math.sqrt(sum((a - r * d) ** 2 for a, d in pairs) / (n * (n - 1))) / mean_d
    return 1.0 + r, se, n


def se_from_per_request_al(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean per-request AL, its SE, requests)."""
    from scipy.stats import sem

    xs = np.array([float(v) for v in values])
    n = len(xs)
    if n < 2:
        raise BadInput(f"power needs per-request AL of >= 2 requests, got {n}")
    return float(xs.mean()), float(sem(xs)), n


def se_from_ci(low: float, high: float, level: float = 0.95) -> float:
    if not high >= low:
        raise BadInput(f"CI ({low}, {high}) is not an interval")
    return (high - low) / (2 * z((1 + level) / 2))


def min_detectable_drop(
    al: float, se: float, confidence: float = CONFIDENCE, power: float = POWER, baseline_se: float = 0.0
) -> float:
    """MDD = (z_c + z_p) · sqrt(se² + baseline_se²) / AL, a relative drop (fraction)."""
    if al <= 0:
        raise BadInput(f"AL must be > 0, got {al}")
    return (z(confidence) + z(power)) * math.hypot(se, baseline_se) / al


def prompts_needed(mdd: float, num_requests: int, tolerance: float) -> int:
    """Requests needed for the MDD to shrink to the tolerance: ceil(n · (MDD / t)²)."""
    if tolerance <= 0:
        raise BadInput(f"tolerance must be > 0, got {tolerance}")
    return max(2, math.ceil(num_requests * (mdd / tolerance) ** 2 - 1e-9))


@dataclass(frozen=True)
class Power:
    acceptance_length: float
    num_requests: int
    se: float
    min_detectable_drop: float  # relative (fraction)
    tolerance: float
    confidence: float
    power: float

    @property
    def detects_tolerance(self) -> bool:
        return self.min_detectable_drop <= self.tolerance

    @property
    def prompts_needed(self) -> int:
        return prompts_needed(self.min_detectable_drop, self.num_requests, self.tolerance)

    def warning(self) -> str | None:
        """One line when the cell cannot detect the tolerance it claims; None when it can."""
        if self.detects_tolerance:
            return None
        return (
            f"cannot detect a {self.tolerance:.0%} AL drop with {self.num_requests} prompts (smallest detectable "
            f"{self.min_detectable_drop:.1%} at {self.confidence:.1%} confidence, {self.power:.0%} power); "
            f"about {self.prompts_needed} prompts would"
        )


def gate_power(
    al: float,
    se: float,
    num_requests: int,
    tolerance: float,
    confidence: float = CONFIDENCE,
    power: float = POWER,
    baseline_se: float = 0.0,
) -> Power:
    mdd = min_detectable_drop(al, se, confidence, power, baseline_se)
    return Power(al, num_requests, math.hypot(se, baseline_se), mdd, tolerance, confidence, power)
