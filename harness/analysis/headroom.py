"""Headroom: the speedup this engine allows at each acceptance, and where a draft sits on it.

Pure: measured points in, a fitted cost model and its predictions out (the sweep that measures the
points is harness/headroom.py).

The model. A decode step of a batch of c requests with k draft tokens costs

    step(k, c) = verify(k + 1 tokens per request, c) + speculating at all + k x draft(c)
               = a + v·c·(k + 1) + s·[k > 0] + k·(d + e·c)

a: the step's fixed cost (scheduler, sampler, launch), v: the verifier's cost per token in the
forward, s: what a speculative step costs whatever its k (the draft's first pass over the verified
tokens, the proposer's and the rejection sampler's bookkeeping), d + e·c: one more draft forward
(fixed + per request). Without s the fit missed the jump from k = 0 to k = 1 (measured on the tiny
stand-in: a step 1.36x the baseline's at k = 1, then +0.15-0.2 per k; fitted 1.19x), and predicted
the draft's cells 10 % high (median; 4 % with it). k = 0 is the no-speculation baseline (one token
per request per step). Each step emits AL tokens per request, so at concurrency c

    speedup(AL; k, c) = AL · step(0, c) / step(k, c)

— the acceptance buys AL, the step's extra cost takes back step(k, c) / step(0, c). The fit needs
the baseline and two speculative ks at two concurrencies at least (the regressors 1, c·(k+1),
[k > 0], k, k·c are then independent); more ks test the model's linearity in k. Its split of the
extra cost into verify and draft rests on one assumption: a verify token costs what a baseline
token costs (v is shared by k = 0 and k > 0).

A point's step time is what it measured: c × wall / request-steps (request-steps: vLLM's
`num_drafts` for a speculative arm, output tokens for the baseline), i.e. c × AL / tokens per second.
The fit is weighted least squares on relative error (rows divided by the measured step), its CIs
from the coefficients' covariance with Student's t; a speedup's CI is the delta method on its log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

TERMS = ("fixed_s", "verify_per_token_s", "speculation_fixed_s", "draft_fixed_s", "draft_per_request_s")
CONFIDENCE = 0.95


@dataclass(frozen=True)
class StepPoint:
    """One measured batch of one arm. kind: 'baseline' (k = 0), 'synthetic' (vLLM's synthetic
    acceptance at `rates`, the draft running) or 'draft' (the draft's own acceptance)."""

    kind: str
    k: int
    concurrency: int
    wall_s: float
    output_tokens: int
    request_steps: float
    rates: tuple[float, ...] | None = None  # synthetic: per-position unconditional acceptance
    accepted_per_pos: tuple[int, ...] = ()
    repeat: int = 0
    drafts: float = 0.0  # vLLM's num_drafts (speculative steps summed over requests)
    pair: str = ""  # the speculative engine a baseline batch was paired with (both carry it)

    @property
    def acceptance_length(self) -> float:
        """vLLM's: 1 + accepted draft tokens per draft (1 without speculation)."""
        if self.k == 0:
            return 1.0
        return 1.0 + sum(self.accepted_per_pos) / self.drafts if self.drafts else float("nan")

    @property
    def step_s(self) -> float:
        return self.concurrency * self.wall_s / self.request_steps

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "acceptance_length": self.acceptance_length, "step_s": self.step_s}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> StepPoint:
        keep = {f: d[f] for f in StepPoint.__dataclass_fields__ if f in d}
        if keep.get("rates") is not None:
            keep["rates"] = tuple(keep["rates"])
        keep["accepted_per_pos"] = tuple(keep.get("accepted_per_pos", ()))
        return StepPoint(**keep)


def design(k: int, concurrency: int) -> np.ndarray:
    """The model's regressors for a step of k draft tokens at concurrency c."""
    c = float(concurrency)
    return np.array([1.0, c * (k + 1), 1.0 if k > 0 else 0.0, float(k), k * c])


def _t(dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, max(dof, 1)))


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def to_list(self) -> list[float]:
        return [self.value, self.lo, self.hi]


@dataclass(frozen=True)
class CostFit:
    """The fitted step cost: coefficients (seconds, TERMS), their covariance, the residual degrees of
    freedom, the points' relative RMS residual, and the k and c range the points covered."""

    coef: tuple[float, ...]
    cov: tuple[tuple[float, ...], ...]
    dof: int
    rms_rel_residual: float
    ks: tuple[int, ...]
    concurrencies: tuple[int, ...]
    terms: tuple[str, ...] = field(default=TERMS)

    @property
    def _beta(self) -> np.ndarray:
        return np.array(self.coef)

    @property
    def _cov(self) -> np.ndarray:
        return np.array(self.cov)

    def coef_ci(self) -> dict[str, Estimate]:
        half = _t(self.dof) * np.sqrt(np.clip(np.diag(self._cov), 0, None))
        return {n: Estimate(b, b - h, b + h) for n, b, h in zip(self.terms, self.coef, half, strict=True)}

    def step_s(self, k: int, concurrency: int) -> Estimate:
        x = design(k, concurrency)
        est = float(x @ self._beta)
        half = _t(self.dof) * math.sqrt(max(float(x @ self._cov @ x), 0.0))
        return Estimate(est, est - half, est + half)

    def _log_ratio(self, k: int, concurrency: int) -> tuple[float, float]:
        """log(step(0, c) / step(k, c)) and its standard error (delta method)."""
        x0, xk = design(0, concurrency), design(k, concurrency)
        s0, sk = float(x0 @ self._beta), float(xk @ self._beta)
        g = x0 / s0 - xk / sk
        return math.log(s0 / sk), math.sqrt(max(float(g @ self._cov @ g), 0.0))

    def speedup(self, acceptance_length: float, k: int, concurrency: int) -> Estimate:
        """The speedup this engine allows at `acceptance_length` with k draft tokens at concurrency c."""
        lr, se = self._log_ratio(k, concurrency)
        h = _t(self.dof) * se
        base = math.log(acceptance_length) + lr
        return Estimate(math.exp(base), math.exp(base - h), math.exp(base + h))

    def al_for(self, target_speedup: float, k: int, concurrency: int) -> Estimate:
        """The acceptance length that buys `target_speedup` at k and c (beyond k + 1: unreachable at k)."""
        lr, se = self._log_ratio(k, concurrency)
        h = _t(self.dof) * se
        base = math.log(target_speedup) - lr
        return Estimate(math.exp(base), math.exp(base - h), math.exp(base + h))

    def split_s(self, k: int, concurrency: int) -> dict[str, float]:
        """A step's cost by part: the baseline step, the extra verify tokens, and drafting (the
        speculative step's fixed cost and the k draft forwards)."""
        a, v, sp, d, e = self.coef
        c = float(concurrency)
        drafting = (sp if k > 0 else 0.0) + k * (d + e * c)
        return {"baseline_step_s": a + v * c, "extra_verify_s": v * c * k, "draft_s": drafting}

    def extrapolated(self, k: int, concurrency: int) -> bool:
        return not (
            min(self.ks) <= k <= max(self.ks) and min(self.concurrencies) <= concurrency <= max(self.concurrencies)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": "step(k, c) = a + v*c*(k+1) + s*[k>0] + k*(d + e*c); speedup = AL * step(0, c) / step(k, c)",
            "terms": list(self.terms),
            "coef": list(self.coef),
            "coef_ci95": {n: e.to_list() for n, e in self.coef_ci().items()},
            "cov": [list(r) for r in self.cov],
            "dof": self.dof,
            "rms_rel_residual": self.rms_rel_residual,
            "ks": list(self.ks),
            "concurrencies": list(self.concurrencies),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CostFit:
        return CostFit(
            coef=tuple(d["coef"]),
            cov=tuple(tuple(r) for r in d["cov"]),
            dof=int(d["dof"]),
            rms_rel_residual=float(d["rms_rel_residual"]),
            ks=tuple(d["ks"]),
            concurrencies=tuple(d["concurrencies"]),
            terms=tuple(d.get("terms", TERMS)),
        )


def cell_steps(points: Iterable[StepPoint]) -> list[tuple[int, int, float]]:
    """(k, c, step seconds) per cell the fit takes: the baseline's median step at each concurrency,
    and each synthetic cell's median over its repeats of (its step / the baseline batch measured
    right before it) x that median. Pairing cancels drift between batches; the median keeps a burst
    of foreign load on one batch from moving the cell (a shared machine's steps vary 2-10x)."""
    pts = [p for p in points if p.request_steps > 0]
    base = [p for p in pts if p.kind == "baseline"]
    med = {c: float(np.median([p.step_s for p in base if p.concurrency == c])) for c in {p.concurrency for p in base}}
    paired = {(p.pair, p.concurrency, p.repeat): p for p in base}
    ratios: dict[tuple[int, int, tuple[float, ...] | None], list[float]] = {}
    for p in pts:
        if p.kind != "synthetic" or p.concurrency not in med:
            continue
        b = paired.get((p.pair, p.concurrency, p.repeat))
        ratios.setdefault((p.k, p.concurrency, p.rates), []).append(p.step_s / (b.step_s if b else med[p.concurrency]))
    out = [(0, c, m) for c, m in sorted(med.items())]
    out += [(k, c, float(np.median(r)) * med[c]) for (k, c, _), r in sorted(ratios.items(), key=lambda kv: kv[0][:2])]
    return out


def fit_cost(points: Iterable[StepPoint]) -> CostFit:
    """Fit the step cost to the baseline and synthetic cells (`cell_steps`; a draft's own points are
    what the fit is checked against, never fitted). ValueError when they cannot identify the model."""
    rows = cell_steps(points)
    if len(rows) <= len(TERMS):
        raise ValueError(f"{len(rows)} cells cannot fit {len(TERMS)} cost terms")
    y = np.array([s for _, _, s in rows])
    x = np.stack([design(k, c) for k, c, _ in rows]) / y[:, None]
    if np.linalg.matrix_rank(x) < len(TERMS):
        raise ValueError("the points do not identify the cost model: they need the baseline, two ks > 0, two loads")
    beta, *_ = np.linalg.lstsq(x, np.ones(len(rows)), rcond=None)
    resid = np.ones(len(rows)) - x @ beta
    dof = len(rows) - len(TERMS)
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(x.T @ x)
    return CostFit(
        coef=tuple(float(b) for b in beta),
        cov=tuple(tuple(float(v) for v in row) for row in cov),
        dof=dof,
        rms_rel_residual=math.sqrt(float(resid @ resid) / len(rows)),
        ks=tuple(sorted({k for k, _, _ in rows})),
        concurrencies=tuple(sorted({c for _, c, _ in rows})),
    )


# ----------------------------------------------------------------------------- acceptance profiles


def geometric_rates(p: float, k: int) -> tuple[float, ...]:
    """Per-position unconditional acceptance of a draft that each position accepts with conditional
    probability p: p, p², ..., p^k (vLLM's synthetic_acceptance_rates)."""
    return tuple(p ** (i + 1) for i in range(k))


def conditional_rates(unconditional: Sequence[float]) -> tuple[float, ...]:
    """P(position i accepted | positions before it accepted), from the unconditional rates."""
    out, prev = [], 1.0
    for a in unconditional:
        out.append(a / prev if prev > 0 else 0.0)
        prev = a
    return tuple(out)


def expected_al(conditional: Sequence[float], k: int) -> float:
    """Expected acceptance length of a chain draft proposing k tokens with these conditional rates
    (positions beyond the rates given are not known: k must not exceed their number)."""
    if k > len(conditional):
        raise ValueError(f"k = {k} needs {k} per-position rates, {len(conditional)} given")
    al, run = 1.0, 1.0
    for q in conditional[:k]:
        run *= q
        al += run
    return al


def rates_of(point: StepPoint) -> tuple[float, ...]:
    """A speculative point's per-position unconditional acceptance: accepted at position i / drafts."""
    return tuple(a / point.drafts for a in point.accepted_per_pos) if point.drafts else ()


# ----------------------------------------------------------------------------- the draft placed on it


@dataclass(frozen=True)
class Placed:
    """A draft's measured cell on the fitted model."""

    k: int
    concurrency: int
    acceptance_length: float
    measured: Estimate  # the draft's measured speedup and its CI over repeats
    allowed: Estimate  # what the engine allows at that AL (the fit)
    gap: dict[str, float]  # ideal (= AL) -> allowed: verify overhead, draft cost; allowed -> measured: rest
    tokens_per_step: float  # what the throughput saw: AL with each request's prefill step counted

    @property
    def efficiency(self) -> float:
        return self.measured.value / self.allowed.value

    @property
    def within(self) -> bool:
        """The prediction falls within the measured speedup's CI."""
        return self.measured.contains(self.allowed.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "concurrency": self.concurrency,
            "acceptance_length": self.acceptance_length,
            "tokens_per_step": self.tokens_per_step,
            "measured_speedup": self.measured.to_list(),
            "allowed_speedup": self.allowed.to_list(),
            "efficiency": self.efficiency,
            "prediction_within_measured_ci": self.within,
            "gap": self.gap,
        }


def ratio_ci(spec_tps: Sequence[float], base_tps: Sequence[float]) -> Estimate:
    """Speedup and its CI from paired repeats (spec_i / base_i, t-interval on the log ratios)."""
    logs = np.log(np.asarray(spec_tps, float) / np.asarray(base_tps, float))
    m = float(logs.mean())
    if len(logs) < 2:
        return Estimate(math.exp(m), float("nan"), float("nan"))
    h = _t(len(logs) - 1) * float(logs.std(ddof=1)) / math.sqrt(len(logs))
    return Estimate(math.exp(m), math.exp(m - h), math.exp(m + h))


def place(
    fit: CostFit, k: int, concurrency: int, al: float, measured: Estimate, tokens_per_step: float | None = None
) -> Placed:
    """The cell's allowed speedup at its measured acceptance, and its gap to the ideal (that
    acceptance itself) split in three: the extra verify tokens, the draft's forwards, and the rest
    (measured below allowed). `tokens_per_step`: output tokens per request-step as the cell's
    throughput saw them (vLLM's AL counts no prefill step; over a 64-token output the one prefill
    step per request makes them ~5 % apart at AL 4), the acceptance the prediction uses; default `al`."""
    at = al if tokens_per_step is None else tokens_per_step
    allowed = fit.speedup(at, k, concurrency)
    parts = fit.split_s(k, concurrency)
    base = parts["baseline_step_s"]
    verify_only = at * base / (base + parts["extra_verify_s"])
    gap = {
        "ideal": at,
        "verify_overhead": at - verify_only,
        "draft_cost": verify_only - allowed.value,
        "rest": allowed.value - measured.value,
    }
    return Placed(k, concurrency, al, measured, allowed, gap, at)


def within_share(placed: Sequence[Placed]) -> float:
    """The share of cells whose predicted speedup lies within the measured speedup's CI."""
    return sum(p.within for p in placed) / len(placed) if placed else float("nan")


# ----------------------------------------------------------------------------- best k


@dataclass(frozen=True)
class KChoice:
    concurrency: int
    k: int
    acceptance_length: float
    speedup: Estimate
    clear: bool  # its CI lies above every other k's estimate (else: within the fit's noise)


def best_k(
    fit: CostFit, conditional: Sequence[float], ks: Sequence[int], concurrency: int
) -> tuple[KChoice, list[KChoice]]:
    """The k that the fit predicts fastest at concurrency c for a draft of these per-position
    conditional rates, and every k's prediction (ks beyond the rates given are skipped)."""
    options = []
    for k in sorted(set(ks)):
        if 1 <= k <= len(conditional):
            al = expected_al(conditional, k)
            options.append(KChoice(concurrency, k, al, fit.speedup(al, k, concurrency), False))
    if not options:
        raise ValueError("no k within the per-position rates given")
    top = max(options, key=lambda o: o.speedup.value)
    clear = all(top.speedup.lo > o.speedup.value for o in options if o is not top)
    return KChoice(top.concurrency, top.k, top.acceptance_length, top.speedup, clear), options


def k_schedule(best: dict[int, int]) -> tuple[tuple[int, int, int], ...]:
    """vLLM's num_speculative_tokens_per_batch_size from the best k at each measured concurrency:
    each concurrency's k covers batch sizes from it up to the next one's (the last: up to 1024)."""
    cs = sorted(best)
    out = []
    for i, c in enumerate(cs):
        lo = 1 if i == 0 else c
        hi = cs[i + 1] - 1 if i + 1 < len(cs) else 1024
        out.append((lo, hi, best[c]))
    return tuple(out)


# ----------------------------------------------------------------------------- a sweep's cells


@dataclass(frozen=True)
class Cell:
    """One (arm kind, k, concurrency) of a sweep: its pooled AL and its speedup over repeats, each
    repeat against the baseline batch measured right before it."""

    kind: str
    k: int
    concurrency: int
    acceptance_length: float
    speedup: Estimate
    rates: tuple[float, ...] | None = None
    tokens_per_step: float = float("nan")  # output tokens / request-steps (prefill steps counted)


def cells(points: Sequence[StepPoint]) -> list[Cell]:
    """Pair every speculative point with its baseline batch and pool the repeats per cell."""
    base = {(p.pair, p.concurrency, p.repeat): p for p in points if p.kind == "baseline"}
    groups: dict[tuple[str, int, int, tuple[float, ...] | None], list[tuple[StepPoint, StepPoint]]] = {}
    for p in points:
        b = base.get((p.pair, p.concurrency, p.repeat))
        if p.kind != "baseline" and b is not None:
            groups.setdefault((p.kind, p.k, p.concurrency, p.rates), []).append((p, b))
    out = []
    for (kind, k, c, rates), pairs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3] or ())
    ):
        drafts = sum(s.drafts for s, _ in pairs)
        al = 1.0 + sum(sum(s.accepted_per_pos) for s, _ in pairs) / drafts if drafts else float("nan")
        est = ratio_ci([s.tokens_per_s for s, _ in pairs], [b.tokens_per_s for _, b in pairs])
        per_step = sum(s.output_tokens for s, _ in pairs) / sum(s.request_steps for s, _ in pairs)
        out.append(Cell(kind, k, c, al, est, rates, per_step))
    return out


def pooled_rates(points: Sequence[StepPoint], kind: str = "draft") -> tuple[float, ...]:
    """The draft's per-position unconditional acceptance at its largest measured k, pooled over
    concurrencies (at T = 0 the draft's proposals do not depend on the batch)."""
    own = [p for p in points if p.kind == kind and p.drafts]
    if not own:
        return ()
    k = max(p.k for p in own)
    at = [p for p in own if p.k == k]
    drafts = sum(p.drafts for p in at)
    return tuple(sum(p.accepted_per_pos[i] for p in at) / drafts for i in range(k))


def measured_best_k(draft_cells: Sequence[Cell], concurrency: int) -> tuple[int, bool] | None:
    """The draft's fastest measured k at concurrency c, and whether it is apart from the runner-up
    beyond noise (its CI above the runner-up's)."""
    at = sorted((c for c in draft_cells if c.concurrency == concurrency), key=lambda c: -c.speedup.value)
    if not at:
        return None
    if len(at) == 1:
        return at[0].k, False
    return at[0].k, bool(at[0].speedup.lo > at[1].speedup.hi)
