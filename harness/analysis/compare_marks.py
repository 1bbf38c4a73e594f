"""Compact compare (issue 14): one row per cell, a column group per run, deltas vs the first run
marked when they are beyond noise.

Per cell and metric (AL, speedup, output tok/s), each run's value and CI:
  acceptance_length  [al_ci_low, al_ci_high]             (per-request bootstrap, measure.py)
  speedup            [speedup_ci_low, speedup_ci_high]   (paired A/B bootstrap, analysis/load.py)
  output_tok_per_s   [output_tok_per_s_ci_low, …_high]   (when a run has them)
Delta of run i = value_i − value_first; relative delta = delta / value_first.
Beyond noise:
  "CI overlap" (default): both CIs present and disjoint (one's low end above the other's high end).
      Identical inputs overlap, so nothing is marked; a missing CI leaves the mark of a nonzero
      delta unknown (None), never a silent "no"; a zero delta is never beyond noise.
  "paired bootstrap" (paired=True, AL only, when both rows carry per-request `per_request_accepted`
      and `per_request_drafts` for the same prompts in the same order): resample prompt indices,
      the same in both runs; beyond noise when the percentile CI of AL_i − AL_first excludes 0.
      More sensitive than CI overlap: the prompts' shared difficulty cancels.
Cells are aligned on key columns (default suite, k, concurrency, temperature); a cell present in one
run only is not a row: it is listed once at the end (`only_in`). `compact` aligns (label, rows) pairs;
`aligned` takes rows the caller already indexed (harness/results/compare.py builds the whole comparison,
this table included, from one alignment). Numbers print through harness.ui.fmt, the one formatter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from harness.errors import BadInput
from harness.ui import MISSING, fmt, fmt_ci

KEY = ("suite", "k", "concurrency", "temperature")
CI_COLUMNS = {
    "acceptance_length": ("al_ci_low", "al_ci_high"),
    "speedup": ("speedup_ci_low", "speedup_ci_high"),
    "output_tok_per_s": ("output_tok_per_s_ci_low", "output_tok_per_s_ci_high"),
}
LABELS = {"acceptance_length": "AL", "speedup": "speedup", "output_tok_per_s": "tok/s"}
DIGITS = {"acceptance_length": 2, "speedup": 2, "output_tok_per_s": 1}
MARK = "*"
Row = Mapping[str, Any]
R = TypeVar("R", bound=Row)


@dataclass(frozen=True)
class Value:
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Delta:
    delta: float | None
    rel: float | None
    beyond_noise: bool | None  # None: no CI to judge by
    test: str  # "CI overlap" | "paired bootstrap" | "no CI"


@dataclass(frozen=True)
class CompactRow:
    key: tuple
    values: dict[str, tuple[Value | None, ...]]  # metric -> one per run
    deltas: dict[str, tuple[Delta | None, ...]]  # metric -> one per run after the first


@dataclass(frozen=True)
class CompactCompare:
    runs: tuple[str, ...]
    key_columns: tuple[str, ...]
    rows: tuple[CompactRow, ...]
    only_in: tuple[tuple[tuple, str], ...]  # (cell key, the one run holding it)

    @property
    def marked(self) -> list[tuple[tuple, str, int]]:
        """(cell key, metric, run index) of every delta beyond noise."""
        return [
            (r.key, m, i + 1)
            for r in self.rows
            for m, ds in r.deltas.items()
            for i, d in enumerate(ds)
            if d is not None and d.beyond_noise
        ]


def cis_disjoint(a: Value, b: Value) -> bool | None:
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return None
    return b.low > a.high or b.high < a.low


def paired_al_difference_ci(
    first: Row, other: Row, level: float = 0.95, num_resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile CI of AL_other − AL_first, resampling the shared prompts; None when not paired."""
    cols = ("per_request_accepted", "per_request_drafts")
    arrays = [np.asarray(r.get(c) or [], dtype=float) for r in (first, other) for c in cols]
    if len({len(a) for a in arrays}) != 1 or len(arrays[0]) < 2:
        return None
    acc_a, d_a, acc_b, d_b = arrays
    idx = np.random.default_rng(seed).integers(0, len(acc_a), size=(num_resamples, len(acc_a)))
    da, db = d_a[idx].sum(axis=1), d_b[idx].sum(axis=1)
    if (da == 0).any() or (db == 0).any():
        return None
    diff = acc_b[idx].sum(axis=1) / db - acc_a[idx].sum(axis=1) / da
    alpha = (1 - level) / 2 * 100
    return float(np.percentile(diff, alpha)), float(np.percentile(diff, 100 - alpha))


def difference(first: float | None, other: float | None) -> tuple[float | None, float | None]:
    """(other − first, that relative to first): None where a value is missing; relative also where first is 0."""
    if first is None or other is None:
        return None, None
    d = other - first
    return d, (d / first if first else None)


def value_of(row: Row | None, metric: str) -> Value | None:
    if row is None:
        return None
    low, high = CI_COLUMNS[metric]
    return Value(row.get(metric), row.get(low), row.get(high))


def delta_of(metric: str, first: Row | None, other: Row | None, paired: bool) -> Delta | None:
    a, b = value_of(first, metric), value_of(other, metric)
    if a is None or b is None or a.value is None or b.value is None:
        return None
    assert first is not None and other is not None  # value_of gave both values
    d, rel = difference(a.value, b.value)
    if paired and metric == "acceptance_length" and (ci := paired_al_difference_ci(first, other)) is not None:
        return Delta(d, rel, ci[0] > 0 or ci[1] < 0, "paired bootstrap")
    beyond = False if d == 0 else cis_disjoint(a, b)  # a zero delta is never beyond noise
    return Delta(d, rel, beyond, "no CI" if beyond is None else "CI overlap")


def index_rows(
    label: str,
    rows: Iterable[R],
    key: Sequence[str],
    hint: str = "compare one draft per run or add the column that tells them apart to the key",
) -> dict[tuple, R]:
    """A run's rows by their key; two rows sharing one would be compared as one cell, so that is refused."""
    out: dict[tuple, R] = {}
    for r in rows:
        k = tuple(r.get(c) for c in key)
        if k in out:
            raise BadInput(f"run {label}: several rows share {dict(zip(key, k))}; {hint}")
        out[k] = r
    return out


def _order(k: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in k)


def ordered(keys: Iterable[tuple]) -> list[tuple]:
    """Distinct cell keys in first-seen order, sorted numbers before labels per column (c=4 before c=16)."""
    return sorted(dict.fromkeys(keys), key=_order)


def aligned(
    labels: Sequence[str],
    indexed: Sequence[Mapping[tuple, Row]],
    key: Sequence[str],
    paired: bool = False,
    metrics: Sequence[str] = tuple(CI_COLUMNS),
) -> CompactCompare:
    """Each run's rows by cell key (index_rows) -> the compact table, each delta vs the first run marked."""
    rows, only = [], []
    for k in ordered(k for idx in indexed for k in idx):
        holders = [i for i, idx in enumerate(indexed) if k in idx]
        if len(labels) > 1 and len(holders) == 1:
            only.append((k, labels[holders[0]]))
            continue
        cells = [idx.get(k) for idx in indexed]
        rows.append(
            CompactRow(
                k,
                {m: tuple(value_of(c, m) for c in cells) for m in metrics},
                {m: tuple(delta_of(m, cells[0], c, paired) for c in cells[1:]) for m in metrics},
            )
        )
    return CompactCompare(tuple(labels), tuple(key), tuple(rows), tuple(only))


def compact(
    runs: Sequence[tuple[str, Sequence[Row]]],
    key: Sequence[str] = KEY,
    paired: bool = False,
    metrics: Sequence[str] = tuple(CI_COLUMNS),
) -> CompactCompare:
    """Align runs' cell rows (label, rows) and mark each delta vs the first run."""
    if not runs:
        raise BadInput("compare needs at least one run")
    return aligned([lab for lab, _ in runs], [index_rows(lab, rows, key) for lab, rows in runs], key, paired, metrics)


def key_cells(key: tuple) -> list[str]:
    """A cell key as table text: temperatures and other floats short (0.7, not 0.700)."""
    return [f"{v:g}" if isinstance(v, float) else fmt(v) for v in key]


def _cell(v: Value | None, d: Delta | None, digits: int) -> str:
    if v is None or v.value is None:
        return MISSING
    num = f"{{:.{digits}f}}"  # a format string: an int value still prints with its decimals
    text = fmt(v.value, num)
    text += fmt_ci(v.low, v.high, num)
    if d is not None and d.delta is not None:
        text += " " + fmt(d.delta, f"{{:+.{digits}f}}") + (MARK if d.beyond_noise else "")
    return text


def table(cc: CompactCompare) -> tuple[list[str], list[list[str]]]:
    """Headers and string cells of the compact table (renderers lay them out)."""
    metrics = list(cc.rows[0].values) if cc.rows else list(CI_COLUMNS)
    headers = [*cc.key_columns] + [f"{run} {LABELS.get(m, m)}" for run in cc.runs for m in metrics]
    body = []
    for r in cc.rows:
        cells = key_cells(r.key)
        for i in range(len(cc.runs)):
            cells += [_cell(r.values[m][i], r.deltas[m][i - 1] if i else None, DIGITS.get(m, 3)) for m in metrics]
        body.append(cells)
    return headers, body


LEGEND = (
    f"{MARK} beyond noise: the two runs' 95 % CIs do not overlap (or, with paired prompts, the paired "
    "bootstrap CI of the AL difference excludes 0); deltas are vs the first run. AL = 1 + accepted/drafts "
    "(incl. the bonus token); speedup = spec ÷ baseline output tok/s."
)
