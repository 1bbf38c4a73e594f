"""The upgrade canary's comparison (issue 54): the same recipe, draft and prompts benched on two vLLM
installations, each cell of the new engine's run against the reference engine's cell at the same
setting, request by request (pure apart from reading the two run folders).

Per cell:
- AL and each per-position rate, new vs reference: the paired gate's relative difference and its
  paired t interval over the requests both runs finished (harness/results/gate/paired.py; 90 %
  two-sided). `ACCEPTANCE CHANGED`: an interval that excludes 0. At T = 0 an unchanged engine gives
  identical per-request counts (an interval [0, 0]), so any excluded 0 is the engine's doing.
- Speedup of each run over its own baseline arm, with the bench's CI (harness/analysis/load.py).
  `SPEEDUP CHANGED`: the two intervals do not overlap.
- TPOT of the speculative arm (per request: (latency − TTFT) / (tokens − 1)), the new engine's mean
  over the reference's on the same requests, with a paired bootstrap CI (95 %, requests resampled).
- T = 0 outputs, request by request: identical or not. A divergence of the speculative outputs is
  `verifier` when the two engines' no-speculation outputs already differ at or before that position
  (the verifier's own greedy output moved: its forward changed, speculation only follows it), else
  `speculation (V)`, V the lossless class of the engine whose speculative output left its own
  baseline (harness/analysis/lossless.py: NUMERICS, SPEC BUG, UNEXPLAINED). `OUTPUTS CHANGED`: any
  divergence, of either arm.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.lossless import first_divergence
from harness.errors import BadInput
from harness.results.gate import paired as P
from harness.results.gate.paired_run import request_counts
from harness.results.runs import Run, describe_setting
from harness.results.table import load_cell_requests
from harness.schema import CellRow
from harness.ui import MISSING, fmt, fmt_ci

CANARY_FILE = "canary.json"  # a canary folder's result (harness/canary.py writes it; the gate reads it)
ACCEPTANCE_CHANGED, SPEEDUP_CHANGED, OUTPUTS_CHANGED = "ACCEPTANCE CHANGED", "SPEEDUP CHANGED", "OUTPUTS CHANGED"
LEVEL_ALPHA = P.ALPHA  # one-sided each way: the gate's 90 % interval


@dataclass(frozen=True)
class Interval:
    point: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"point": self.point, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class OutputDiff:
    """T = 0 outputs of one arm or both, request by request."""

    compared: int
    identical: int
    divergences: tuple[dict[str, Any], ...] = ()  # request, arm, position, kind


@dataclass(frozen=True)
class CanaryCell:
    where: str
    draft: str
    estimates: tuple[P.PairedEstimate, ...]  # AL first, then per-position rates: new vs reference
    speedup: tuple[Interval, Interval]  # reference, new
    tpot_ms: tuple[float | None, float | None]  # mean per-request TPOT, reference and new
    tpot_ratio: Interval  # new / reference, paired
    outputs: OutputDiff | None  # None: T > 0 (outputs are samples)
    flags: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default=())
    setting: tuple[Any, ...] = ()  # (suite, k, concurrency, temperature, request rate): the gate's checks

    def to_dict(self) -> dict[str, Any]:
        return {
            "cell": self.where,
            "setting": list(self.setting),
            "draft": self.draft,
            "flags": list(self.flags),
            "estimates": [e.__dict__ for e in self.estimates],
            "speedup": [s.to_dict() for s in self.speedup],
            "tpot_ms": list(self.tpot_ms),
            "tpot_ratio": self.tpot_ratio.to_dict(),
            "outputs": None if self.outputs is None else self.outputs.__dict__,
            "problems": list(self.problems),
        }


def is_canary(folder: Path) -> bool:
    return (folder / CANARY_FILE).is_file()


def read_canary(folder: Path) -> dict[str, Any]:
    """canary.json as `harness canary` wrote it (a malformed one: one BadInput line)."""
    path = folder / CANARY_FILE
    try:
        data = json.loads(path.read_text())
        data["environments"], data["comparisons"]  # noqa: B018 (the two keys the gate reads)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path}: not a canary result ({e}); rerun `harness canary` into this folder") from e
    return data


def canary_run_dirs(folder: Path) -> tuple[list[Path], str]:
    """The run folders of a canary's engines that served (oldest engine first), and its verdict line."""
    data = read_canary(folder)
    served = [Path(e["run_dir"]) for e in data["environments"] if not e.get("error") and e.get("run_dir")]
    where = f"; first change at {data['first_change']}" if data.get("first_change") else ""
    return served, f"canary {folder.name}: verdict {data.get('verdict')}{where} ({folder / CANARY_FILE})"


def acceptance_changed(estimates: Sequence[P.PairedEstimate]) -> bool:
    return any(e.low > 0 or e.high < 0 for e in estimates)


def intervals_disjoint(a: Interval, b: Interval) -> bool:
    if None in (a.low, a.high, b.low, b.high):
        return False
    return bool(a.high < b.low or b.high < a.low)  # type: ignore[operator]


def _records(run: Run, row: CellRow, arm: str) -> dict[str, dict[str, Any]]:
    side = load_cell_requests(run.path, row.cell_id) or {}
    return {f"{r['request_id']}#{r.get('repeat', 0)}": r for r in side.get(arm, [])}


def _tpot_ms(r: dict[str, Any]) -> float | None:
    n, lat, ttft = len(r.get("output_token_ids") or ()), r.get("latency_s"), r.get("ttft_s")
    return 1000 * (lat - ttft) / (n - 1) if n > 1 and lat is not None and ttft is not None else None


def _ratio_of_means(new: np.ndarray, ref: np.ndarray, axis: int = -1) -> np.ndarray:
    return new.mean(axis=axis) / ref.mean(axis=axis)


def tpot_comparison(ref: dict[str, dict], new: dict[str, dict]) -> tuple[float | None, float | None, Interval]:
    """Mean TPOT of each engine over the requests both finished, and new / reference with a paired
    bootstrap CI (scipy.stats.bootstrap, percentile, 95 %, seeded as metrics.bootstrap_ci)."""
    from scipy.stats import bootstrap

    pairs = [(t1, t2) for k in new if k in ref if (t1 := _tpot_ms(ref[k])) and (t2 := _tpot_ms(new[k]))]
    if not pairs:
        return None, None, Interval(None, None, None)
    arr = np.asarray(pairs, dtype=float)
    ref_mean, new_mean = float(arr[:, 0].mean()), float(arr[:, 1].mean())
    point = new_mean / ref_mean
    if len(pairs) < 2 or np.ptp(arr[:, 1] / arr[:, 0]) == 0:
        return ref_mean, new_mean, Interval(point, point, point)
    res = bootstrap(
        (arr[:, 1], arr[:, 0]),
        _ratio_of_means,
        paired=True,
        vectorized=True,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    ci = res.confidence_interval
    return ref_mean, new_mean, Interval(point, float(ci.low), float(ci.high))


def _divergence_kind(
    key: str, spec: tuple[dict, dict], base: tuple[dict | None, dict | None], verdicts: tuple[str | None, str | None]
) -> dict[str, Any] | None:
    """One request's speculative outputs on the two engines: None when identical, else where they
    part and why (module docstring)."""
    ref_s, new_s = spec[0]["output_token_ids"], spec[1]["output_token_ids"]
    d = first_divergence(new_s, ref_s)
    if d is None:
        return None
    ref_b, new_b = (b["output_token_ids"] if b else None for b in base)
    kind = "speculation"
    if ref_b is not None and new_b is not None:
        db = first_divergence(new_b, ref_b)
        if db is not None and db.position <= d.position:
            kind = "verifier"
        else:  # which engine's speculative output left its own baseline
            off_new = first_divergence(new_s, new_b) is not None
            verdict = verdicts[1] if off_new else verdicts[0]
            kind = f"speculation ({verdict or 'unclassified'}, {'new' if off_new else 'reference'} engine)"
    return {"request": key, "arm": "speculative", "position": d.position, "kind": kind}


def output_diff(ref_run: Run, ref_row: CellRow, new_run: Run, new_row: CellRow) -> OutputDiff:
    """T = 0 outputs of both arms, request by request (module docstring)."""
    spec = (_records(ref_run, ref_row, "speculative"), _records(new_run, new_row, "speculative"))
    base = (_records(ref_run, ref_row, "baseline"), _records(new_run, new_row, "baseline"))
    verdicts = (ref_row.lossless_verdict, new_row.lossless_verdict)
    compared = identical = 0
    divs: list[dict[str, Any]] = []
    for key in (k for k in spec[1] if k in spec[0]):
        compared += 1
        d = _divergence_kind(key, (spec[0][key], spec[1][key]), (base[0].get(key), base[1].get(key)), verdicts)
        if d is None:
            identical += 1
        else:
            divs.append(d)
    for key in (k for k in base[1] if k in base[0]):
        db = first_divergence(base[1][key]["output_token_ids"], base[0][key]["output_token_ids"])
        if db is not None:
            divs.append({"request": key, "arm": "baseline", "position": db.position, "kind": "verifier"})
    return OutputDiff(compared, identical, tuple(divs))


def _speedup(row: CellRow) -> Interval:
    return Interval(row.speedup, row.speedup_ci_low, row.speedup_ci_high)


def canary_cell(ref_run: Run, ref_row: CellRow, new_run: Run, new_row: CellRow, tolerance: float) -> CanaryCell:
    pairs = P.paired(request_counts(new_run, new_row), request_counts(ref_run, ref_row))
    ests = tuple(e for m in range(-1, new_row.k) if (e := P.paired_estimate(pairs, m, tolerance)) is not None)
    problems = () if ests else (f"{len(pairs)} paired requests with drafts: no acceptance comparison",)
    ref_t, new_t, ratio = tpot_comparison(
        _records(ref_run, ref_row, "speculative"), _records(new_run, new_row, "speculative")
    )
    outputs = output_diff(ref_run, ref_row, new_run, new_row) if new_row.temperature == 0 else None
    speedups = (_speedup(ref_row), _speedup(new_row))
    flags = [ACCEPTANCE_CHANGED] if acceptance_changed(ests) else []
    flags += [SPEEDUP_CHANGED] if intervals_disjoint(*speedups) else []
    flags += [OUTPUTS_CHANGED] if outputs is not None and outputs.divergences else []
    return CanaryCell(
        describe_setting(new_row.setting),
        new_row.draft,
        ests,
        speedups,
        (ref_t, new_t),
        ratio,
        outputs,
        tuple(flags),
        problems,
        tuple(new_row.setting),
    )


def canary_cells(ref_run: Run, new_run: Run, tolerance: float) -> tuple[list[CanaryCell], list[str]]:
    """Every ok speculative cell of the new run against the reference run's at the same setting and
    draft; the cells one run lacks, named."""
    ref = {(r.setting, r.draft): r for r in ref_run.rows if r.is_speculative and r.ok}
    new = {(r.setting, r.draft): r for r in new_run.rows if r.is_speculative and r.ok}
    missing = [
        f"{describe_setting(s)} {d}: only in {'reference' if (s, d) in ref else 'new'} run"
        for s, d in ref.keys() ^ new.keys()
    ]
    cells = [canary_cell(ref_run, ref[key], new_run, new[key], tolerance) for key in new if key in ref]
    return cells, sorted(missing)


def first_change(steps: Sequence[tuple[str, Sequence[CanaryCell]]]) -> str | None:
    """Envs in order, each step its cells against the env before it: the first env whose cells carry
    a flag (the version where a change beyond noise appears), or None."""
    return next((name for name, cells in steps if any(c.flags for c in cells)), None)


def clean_zero(x: float) -> float:
    """0 for what prints as ±0.0 % (float noise of identical counts)."""
    return x if abs(x) >= 5e-5 else 0.0


def fmt_rel(e: P.PairedEstimate) -> str:
    d, lo, hi = (clean_zero(x) for x in (e.diff, e.low, e.high))
    return f"{e.baseline:.3f} → {e.candidate:.3f} ({d:+.1%} [{lo:+.1%}, {hi:+.1%}])"


def fmt_interval(i: Interval, digits: int = 2) -> str:
    """A point with its CI, through the one formatter (ui.fmt, ui.fmt_ci; MISSING when unknown)."""
    point = fmt(i.point, digits)
    return point if point == MISSING else point + fmt_ci(i.low, i.high, digits)
