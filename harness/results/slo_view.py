"""A run's open-loop cells (bench.request_rate) seen across offered rates: per (draft, suite, k,
concurrency, T) both arms' latency percentiles, achieved rate and goodput at each rate, each arm's
saturation point and, with bench.slo, each arm's SLO rate with its CI and the speculative arm's
over the baseline's. Definitions: harness/analysis/slo.py. The SLO rate's bootstrap reads the
per-request timings of the cells' side files (cells/requests/); cells without them get the point
values only."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.analysis import slo
from harness.analysis.load import ABOVE
from harness.results.checks import Check
from harness.results.runs import Run
from harness.results.table import load_cell_requests
from harness.schema import BASELINE, CellRow
from harness.schema_requests import RequestRecord


@dataclass(frozen=True)
class RateLine:
    draft: str
    suite: str
    k: int
    concurrency: int
    temperature: float
    rates: tuple[float, ...]
    baseline: tuple[CellRow, ...]  # one per rate
    speculative: tuple[CellRow, ...]
    saturation_baseline: float | None
    saturation_speculative: float | None
    slo: slo.SloComparison | None  # None without bench.slo

    @property
    def key(self) -> str:
        return f"{self.draft} · {self.suite} k={self.k} c={self.concurrency} T={self.temperature:g}"


def _timings(run_dir: Path | None, row: CellRow, arm: str) -> list[slo.Timing]:
    return _arm_timings(load_cell_requests(run_dir, row.cell_id) if run_dir else None, row, arm)


def _arm_timings(sides: dict | None, row: CellRow, arm: str) -> list[slo.Timing]:
    records = [RequestRecord.from_dict(r) for r in (sides or {}).get(arm, [])]
    return slo.timings_from_records(records, int(row.num_failed or 0))


def rate_lines(run: Run) -> list[RateLine]:
    """One line per (draft, suite, k, concurrency, T) with open-loop cells, rates ascending."""
    spec: dict[tuple, dict[float, CellRow]] = defaultdict(dict)
    base = {r.cell_id: r for r in run.rows if r.mode == BASELINE}
    for r in run.rows:
        if r.is_speculative and r.request_rate and r.cell_id in base:
            key = (str(r.draft), str(r.suite), int(r.k), int(r.concurrency), float(r.temperature))
            spec[key][float(r.request_rate)] = r
    bounds = slo.bounds_s(run.manifest.slo or {})
    out = []
    for key, by_rate in sorted(spec.items()):
        rates = tuple(sorted(by_rate))
        ss = tuple(by_rate[x] for x in rates)
        bs = tuple(base[r.cell_id] for r in ss)
        sides = [load_cell_requests(run.path, r.cell_id) for r in ss]  # one read per cell, both arms
        bt = [_arm_timings(d, r, "baseline") for d, r in zip(sides, bs)]  # a shared arm's: in each cell's file
        st = [_arm_timings(d, r, "speculative") for d, r in zip(sides, ss)]
        cmp = slo.compare_slo_rates(rates, bt, st, bounds) if bounds else None
        out.append(RateLine(*key, rates, bs, ss, slo.saturation(rates, bt), slo.saturation(rates, st), cmp))
    return out


def slo_text(bounds: dict[str, float]) -> str:
    return ", ".join(f"p99 {m.upper()} <= {v * 1000:g} ms" for m, v in bounds.items())


def _rate(x: float | None, top: float) -> str:
    if x is None:
        return "none"
    return f">= {top:g}/s (above the grid)" if x >= top else ("below the grid" if x <= 0 else f"{x:.3g}/s")


def rate_text(s: slo.SloRate, top: float) -> str:
    """An arm's SLO rate with its CI, as the report and the main job print it."""
    point = _rate(slo.position(s.point, top), top)
    ci = f" [{_rate(s.low, top)}, {_rate(s.high, top)}]" if s.low is not None and s.high is not None else ""
    return point + ci


def ratio_text(c: slo.SloComparison) -> str:
    """The ratio with its CI; ">=" when the speculative arm met the SLO on the whole grid (its SLO
    rate is then the grid's top, a lower bound), "<=" when the baseline did."""
    if c.ratio is None:
        return "none (the baseline misses the SLO at every rate)"
    spec_above, base_above = (x.point.where == ABOVE for x in (c.speculative, c.baseline))
    if spec_above and base_above:
        return "none (both arms meet the SLO on the whole grid: offer higher rates)"
    high = f"{c.ratio_high:.2f}" if c.ratio_high is not None else "inf"
    ci = f" [{c.ratio_low:.2f}, {high}]" if c.ratio_low is not None else ""
    bound = ">= " if spec_above else "<= " if base_above else ""
    return f"{bound}{c.ratio:.2f}x{ci}" + (" (a bound: one arm met the SLO on the whole grid)" if bound else "")


def slo_ratio_checks(run: Run, min_ratio: float, noise_aware: bool) -> tuple[list[Check], list[str]]:
    """gate.min_slo_rate_ratio: per open-loop line, the speculative arm's SLO rate over the
    baseline's >= min_ratio (noise-aware: the ratio's CI upper end is held). A run without
    open-loop cells under an SLO has nothing to check: a problem, not a pass."""
    lines = [x for x in rate_lines(run) if x.slo is not None]
    if not lines:
        return [], [
            f"gate.min_slo_rate_ratio {min_ratio:g}: run {run.label} has no open-loop cells under an SLO "
            "(bench.request_rate and bench.slo)"
        ]
    checks = []
    for x in lines:
        assert x.slo is not None
        value = x.slo.ratio
        compared = x.slo.ratio_high if noise_aware and x.slo.ratio_high is not None else value
        passed = compared is not None and compared >= min_ratio
        checks.append(
            Check(
                suite=x.suite,
                k=x.k,
                concurrency=x.concurrency,
                temperature=x.temperature,
                metric="SLO rate ratio",
                baseline=None,
                value=value,
                bound=min_ratio,
                passed=passed,
                compared=compared,
                draft=x.draft,
                detail=f"{ratio_text(x.slo)} over rates {', '.join(f'{r:g}' for r in x.rates)}/s "
                f"{'>=' if passed else '<'} bound {min_ratio:g}{' (CI upper end)' if compared is not value else ''}",
            )
        )
    return checks, []
