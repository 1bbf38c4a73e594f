"""A run's finished rows as typed rows (harness/schema.py), for compare, gate and report: each cell
file validated once into `CellRow`s (`table.read_run_rows`; no DataFrame on the way), so killed runs
work: only finished cells, plus the planned ones missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.schema import CellRow
from harness.schema_manifest import Manifest


@dataclass(frozen=True)
class Run:
    path: Path
    label: str
    manifest: Manifest
    rows: list[CellRow]
    missing: list[str]  # planned cell ids with no finished cell

    @property
    def status(self) -> str:
        return self.manifest.status

    def incomplete_note(self) -> str | None:
        """One line saying what a killed run lacks, or None when nothing is missing."""
        if not self.missing:
            return None
        planned = len(self.manifest.planned_cells)
        return f"{self.label} ({self.status}): {len(self.missing)} of {planned} planned cells missing: " + ", ".join(
            self.missing
        )


def read_run(run: str | Path) -> Run:
    from harness.results.table import read_run_rows, resolve_run

    folder = resolve_run(run)
    manifest, rows, missing = read_run_rows(folder)
    return Run(folder, str(manifest.run_id or folder.name), manifest, rows, missing)


def unique_labels(runs: list[Run]) -> list[str]:
    """Run labels, made unique (the same run id twice gets #2, #3)."""
    seen: dict[str, int] = {}
    out = []
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
        out.append(r.label if seen[r.label] == 1 else f"{r.label}#{seen[r.label]}")
    return out


def describe_setting(key: tuple) -> str:
    """`suite k= c= T=` and, for an open-loop cell (request rate > 0), `rate=N/s`."""
    suite, k, c, t, *rest = key
    text = f"{suite} k={k} c={c} T={t:g}" if isinstance(t, int | float) else f"{suite} k={k} c={c} T={t}"
    rate = rest[0] if rest else 0.0
    return f"{text} rate={rate:g}/s" if rate else text


def closed_loop(rows: list[CellRow]) -> list[CellRow]:
    """The rows measured closed-loop (request rate 0): what the concurrency views (crossover, best
    k, summaries) compare; open-loop rows have their own view (harness/results/slo_view.py)."""
    return [r for r in rows if not r.request_rate]
