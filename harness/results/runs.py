"""A run's finished rows as plain dicts, for compare, gate and report (read through
`table.load_run`, so killed runs work: only finished cells, plus the planned ones missing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.ui import fmt  # noqa: F401  (re-exported: the one formatter, harness/ui.py)

# What identifies a measured setting across runs (the draft label may differ between runs).
SETTING = ("suite", "k", "concurrency", "temperature")
# Cells that differ in any of these measured different things: never aligned by accident.
COMPARABILITY = ("verifier_hash", "max_tokens", "suite_version", "suite_sha")
BASELINE, SPECULATIVE = "baseline", "speculative"


@dataclass(frozen=True)
class Run:
    path: Path
    label: str
    manifest: dict[str, Any]
    rows: list[dict[str, Any]]
    missing: list[str]  # planned cell ids with no finished cell

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "unknown"))

    def incomplete_note(self) -> str | None:
        """One line saying what a killed run lacks, or None when nothing is missing."""
        if not self.missing:
            return None
        planned = len(self.manifest.get("planned_cells", []))
        return f"{self.label} ({self.status}): {len(self.missing)} of {planned} planned cells missing: " + ", ".join(
            self.missing
        )


def _clean(value: Any) -> Any:
    """pandas turns None into NaN in numeric columns; the results layer wants None back."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, list | tuple | dict | str):
        return _clean(value.item())  # numpy scalar
    if hasattr(value, "tolist"):
        return value.tolist()  # numpy array from parquet list columns
    return value


def read_run(run: str | Path) -> Run:
    from harness.results.table import load_run, resolve_run

    folder = resolve_run(run)
    manifest, df, missing = load_run(folder)
    rows = [{k: _clean(v) for k, v in r.items()} for r in df.to_dict("records")]
    return Run(folder, str(manifest.get("run_id") or folder.name), manifest, rows, list(missing))


def unique_labels(runs: list[Run]) -> list[str]:
    """Run labels, made unique (the same run id twice gets #2, #3)."""
    seen: dict[str, int] = {}
    out = []
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
        out.append(r.label if seen[r.label] == 1 else f"{r.label}#{seen[r.label]}")
    return out


def setting(row: dict[str, Any]) -> tuple:
    return tuple(row.get(c) for c in SETTING)


def describe_setting(key: tuple) -> str:
    suite, k, c, t = key
    return f"{suite} k={k} c={c} T={t:g}" if isinstance(t, int | float) else f"{suite} k={k} c={c} T={t}"


def is_speculative(row: dict[str, Any]) -> bool:
    return row.get("mode") == SPECULATIVE


def list_column(value: Any) -> list:
    """A row's list column as a list: a list (cells/*.json), an array (results.parquet), or absent
    (None, or NaN where pandas filled a missing column)."""
    return [] if value is None or isinstance(value, float) else list(value)


# A row's breakdown columns: the bucket names' column per breakdown (harness/bench/breakdown.py)
BUCKET_NAMES = {
    "output_position": "output_position_buckets",
    "prompt_length": "prompt_length_buckets",
    "segment": "segments",
    "k": "k_sweep",
}


def buckets(r: dict[str, Any], what: str) -> list[tuple[str, float, float | None, float | None, int | None]]:
    """(bucket, AL, CI low, CI high, drafts) of one breakdown of a row (`what`: a BUCKET_NAMES
    key), buckets without an AL left out."""
    names, al = list_column(r.get(BUCKET_NAMES[what])), list_column(r.get(f"al_by_{what}"))
    lo, hi = list_column(r.get(f"al_by_{what}_ci_low")), list_column(r.get(f"al_by_{what}_ci_high"))
    n = list_column(r.get(f"drafts_by_{what}"))

    def at(xs: list, i: int):
        return xs[i] if i < len(xs) else None

    return [
        (str(name), float(v), at(lo, i), at(hi, i), at(n, i))
        for i, (name, v) in enumerate(zip(names, al))
        if v is not None
    ]
