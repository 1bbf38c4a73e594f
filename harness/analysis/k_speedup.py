"""Speedup at every k from a few measured ks: the step-cost line (bench.k_measured).

A speculative step at k, in units of the no-speculation step at the same load, costs

    c(k) = a + s * k        a: the verify step's fixed part (its k+1 tokens, the step's overhead)
                            s: what each more drafted token adds (drafting it, verifying it)

and emits tau(k) tokens (tokens per step: AL when every step drafts), so the speedup is
S(k) = tau(k) / c(k) (Leviathan et al., arXiv 2211.17192: E / (1 + k c) with a = 1). Each measured k
is one point (k, tau(k) / S(k)) on the line; two or more fix a and s (least squares), and
S(k') = tau(k') / c(k') at every other k', with tau(k') from the largest k's per-step records
(harness/analysis/k_sweep.py). The interval of S(k') is the line's range over the measured
speedups' CI ends (every combination of low and high ends): conservative, not a coverage
guarantee. Pure.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MeasuredK:
    """One measured arm at k: its tokens per step and its speedup with the CI's ends."""

    k: int
    tokens_per_step: float
    speedup: float
    speedup_low: float
    speedup_high: float


@dataclass(frozen=True)
class KEstimate:
    k: int
    tokens_per_step: float
    speedup: float
    speedup_low: float
    speedup_high: float
    measured: bool  # an arm of its own, not the line


def step_cost_line(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """(a, s) of the least-squares line through (k, cost) points; None with fewer than two distinct ks."""
    ks = {k for k, _ in points}
    if len(ks) < 2:
        return None
    n = len(points)
    mk = sum(k for k, _ in points) / n
    mc = sum(c for _, c in points) / n
    s = sum((k - mk) * (c - mc) for k, c in points) / sum((k - mk) ** 2 for k, _ in points)
    return mc - s * mk, s


def _line_speedup(measured: Sequence[MeasuredK], speedups: Sequence[float], k: int, tps: float) -> float | None:
    line = step_cost_line([(m.k, m.tokens_per_step / x) for m, x in zip(measured, speedups, strict=True) if x > 0])
    if line is None:
        return None
    cost = line[0] + line[1] * k
    return tps / cost if cost > 0 else None


def speedup_by_k(measured: Sequence[MeasuredK], tokens_per_step: Mapping[int, float]) -> list[KEstimate]:
    """Every k of `tokens_per_step` (measured ks keep their own arm's figures): the line's speedup and its
    range over the measured CI ends. Empty when fewer than two ks were measured."""
    if len({m.k for m in measured}) < 2:
        return []
    own = {m.k: m for m in measured}
    corners = list(itertools.product(*[(m.speedup_low, m.speedup_high) for m in measured]))
    out = []
    for k, tps in sorted(tokens_per_step.items()):
        if k in own:
            m = own[k]
            out.append(KEstimate(k, m.tokens_per_step, m.speedup, m.speedup_low, m.speedup_high, True))
            continue
        point = _line_speedup(measured, [m.speedup for m in measured], k, tps)
        ends = [v for c in corners if (v := _line_speedup(measured, c, k, tps)) is not None]
        if point is None or not ends:
            continue
        out.append(KEstimate(k, tps, point, min(ends + [point]), max(ends + [point]), False))
    return out


def best_k(estimates: Sequence[KEstimate]) -> tuple[int, list[int]] | None:
    """The k with the highest speedup, and every k whose interval reaches the best one's lower end (the
    ks the estimates cannot tell from it: where another engine would settle the answer)."""
    if not estimates:
        return None
    top = max(estimates, key=lambda e: e.speedup)
    return top.k, [e.k for e in estimates if e.k != top.k and e.speedup_high >= top.speedup_low]
