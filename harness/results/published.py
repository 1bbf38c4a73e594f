"""Published acceptance figures beside measured cells, never mixed into them.

The figures live in docs/published_figures.csv, one cited row each (model, draft, draft format,
dataset, k, temperature, thinking, acceptance length, speedup, hardware, engine, source). A measured
speculative cell matches a published row when all three agree:

- verifier family: for a run on a stand-in, its architecture (`kimi-k2.5`, `deepseek-v3`, `llama`);
  for a checkpoint, its config.json `model_type` (`kimi_k25` -> kimi-k2.5, `kimi_k2` -> kimi-k2);
  for a published row, its model name up to the version (`Kimi-K2.5-NVFP4` -> kimi-k2.5).
- dataset: the public benchmark the suite holds (harness.benchfiles.dataset_of_suite); our own
  built-in suites never match.
- k (num_speculative_tokens).

Temperature, thinking, hardware and engine are shown, not matched: a reader sees how far the
published setup is from the measured one.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.benchfiles import dataset_of_suite
from harness.errors import BadInput
from harness.schema import CellRow
from harness.schema_manifest import Manifest
from harness.ui import SETTING_HEADERS, fmt

FIGURES = Path(__file__).resolve().parents[2] / "docs" / "published_figures.csv"
COLUMNS = (
    "model",
    "draft",
    "draft_format",
    "dataset",
    "k",
    "temperature",
    "thinking",
    "acceptance_length",
    "speedup",
    "hardware",
    "engine",
    "source",
)
MODEL_TYPES = {"kimi_k25": "kimi-k2.5", "kimi_k2": "kimi-k2", "deepseek_v3": "deepseek-v3", "llama": "llama"}
HEADERS = [
    *SETTING_HEADERS,
    "measured AL (this run)",
    "published AL",
    "published speedup (×)",
    "published model + draft (format)",
    "published setup",
    "source",
]


@dataclass(frozen=True)
class Published:
    model: str
    draft: str
    draft_format: str
    dataset: str
    k: int
    temperature: float | None
    thinking: str
    acceptance_length: float
    speedup: float | None
    hardware: str
    engine: str
    source: str

    @property
    def family(self) -> str:
        return family_of_model(self.model)

    def setup(self) -> str:
        t = "T not stated" if self.temperature is None else f"T={self.temperature:g}"
        parts = [t, f"thinking {self.thinking}" if self.thinking else "", self.hardware, self.engine]
        return ", ".join(p for p in parts if p)


def family_of_model(name: str) -> str:
    m = re.match(r"kimi-k2(\.\d+)?", name.strip().lower())
    return m.group(0) if m else name.strip().lower()


def _number(value: str, column: str, where: str, optional: bool) -> float | None:
    if not value.strip() and optional:
        return None
    try:
        return float(value)
    except ValueError as e:
        raise BadInput(f"{where}: {column} {value!r} is not a number") from e


def _row(raw: dict[str, str], where: str) -> Published:
    if not raw.get("source", "").strip():
        raise BadInput(f"{where}: every published figure needs its source")
    k = _number(raw["k"], "k", where, optional=False)
    if k is None or k != int(k) or k < 1:
        raise BadInput(f"{where}: k {raw['k']!r} must be a whole number ≥ 1")
    al = _number(raw["acceptance_length"], "acceptance_length", where, optional=False)
    if al is None or not 1 <= al <= k + 1:
        raise BadInput(f"{where}: acceptance_length {al} must lie in 1 … k+1 (AL includes the bonus token)")
    return Published(
        raw["model"],
        raw["draft"],
        raw["draft_format"],
        raw["dataset"],
        int(k),
        _number(raw["temperature"], "temperature", where, optional=True),
        raw["thinking"],
        al,
        _number(raw["speedup"], "speedup", where, optional=True),
        raw["hardware"],
        raw["engine"],
        raw["source"],
    )


def load_published(path: Path = FIGURES) -> list[Published]:
    if not path.is_file():
        raise BadInput(f"{path}: published figures table not found")
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise BadInput(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
        return [_row(raw, f"{path}:{i}") for i, raw in enumerate(reader, 2)]


def verifier_family(manifest: Manifest) -> str | None:
    """The run's verifier family: the stand-in's architecture, else the checkpoint's model_type."""
    if manifest.standin:
        return str(manifest.standin)
    paths = [manifest.recipe_verifier_path, *manifest.verifier_paths]
    for p in filter(None, paths):
        meta, config = Path(p) / "standin.json", Path(p) / "config.json"
        try:
            if meta.is_file():
                return str(json.loads(meta.read_text())["arch"])
            if config.is_file():
                model_type = str(json.loads(config.read_text()).get("model_type", ""))
                return MODEL_TYPES.get(model_type, model_type or None)
        except (OSError, ValueError, KeyError):
            continue  # an unreadable folder tells nothing; the next candidate may
    return None


def matches(rows: list[CellRow], manifest: Manifest, published: list[Published]) -> list[tuple[CellRow, Published]]:
    """(measured speculative row, published figure) pairs whose family, dataset and k agree."""
    family = verifier_family(manifest)
    if family is None:
        return []
    sources = manifest.suite_sources
    out = []
    for row in rows:
        if not row.is_speculative:
            continue
        dataset = dataset_of_suite(str(row.suite), sources.get(str(row.suite), ""))
        out += [
            (row, p)
            for p in published
            if dataset is not None and p.family == family and p.dataset == dataset and p.k == row.k
        ]
    return out


def table_rows(pairs: list[tuple[CellRow, Published]]) -> list[list[str]]:
    return [
        [
            str(r.suite),
            str(r.draft),
            str(r.k),
            str(r.concurrency),
            f"{r.temperature or 0:g}",
            fmt(r.acceptance_length, "{:.3f}"),
            f"{p.acceptance_length:.2f} (published)",
            fmt(p.speedup, "{:.2f}"),
            f"{p.model} + {p.draft} ({p.draft_format})",
            p.setup(),
            p.source,
        ]
        for r, p in pairs
    ]


def for_runs(runs: list[tuple[str, list[CellRow], Manifest]], published: list[Published]) -> list[list[str]]:
    """Table rows (run label first) for several runs given as (label, rows, manifest)."""
    return [[label, *row] for label, rows, manifest in runs for row in table_rows(matches(rows, manifest, published))]


def to_rich(rows: list[list[str]]):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="Published figures for comparison (not measured here)", caption=NOTE)
    for h in ["run", *HEADERS]:
        t.add_column(escape(h))
    for row in rows:
        t.add_row(*(escape(x) for x in row))
    return t


def notes(manifest: Manifest) -> list[str]:
    out = [NOTE]
    if manifest.standin:
        out.append(
            "This run's verifier is a tiny stand-in of the architecture, not the published model: "
            "its acceptance is not expected to reach the published figures."
        )
    return out


NOTE = (
    "Published figures are other people's measurements on other hardware and engines, shown for "
    "comparison only; none enters this run's numbers. A cell matches when verifier family, dataset and k "
    "agree (harness/results/published.py)."
)
