"""baseline.json as the gate reads it (harness/results/gate/): the file (`BaselineFile`), its
cells (`BaselineCell`: a run row's BASELINE_COLUMNS, the segment breakdown as typed buckets, and the
floors the gate holds a run to) and its crossovers (`BaselineCrossover`). Older files (absent
columns, no request_rate) read back through harness/schema.py's `lenient_model`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from harness.schema import Breakdown, Breakdowns, Bucket, CellRow, Setting, lenient_model

BASELINE_FILE = "baseline.json"
BASELINE_FORMAT = 1

# The row columns a baseline cell keeps (with its floors): what the gate compares.
BASELINE_COLUMNS = (
    "draft",
    "method",
    "suite",
    "suite_version",
    "suite_sha",
    "k",
    "concurrency",
    "temperature",
    "request_rate",
    "max_tokens",
    "verifier_hash",
    "acceptance_length",
    "per_position_rates",
    "al_ci_low",
    "al_ci_high",
    "speedup",
    "al_se",
    "num_prompts",
    "segments",
    "al_by_segment",
    "sampling_p_value",
)
_BASELINE_SEGMENT = ("segments", "al_by_segment")  # the segment breakdown's columns a baseline keeps


class BaselineCell(BaseModel):
    """A cell of baseline.json: its row's BASELINE_COLUMNS (the segment breakdown as
    `breakdowns.segment`, its labels and AL), the per-position floors the gate holds it to, and its
    per-segment AL floors (thinking runs)."""

    draft: str
    method: str
    suite: str
    suite_version: str
    suite_sha: str
    k: int
    concurrency: int
    temperature: float
    request_rate: float = 0.0
    max_tokens: int
    verifier_hash: str
    acceptance_length: float | None = None
    per_position_rates: list[float] = []
    al_ci_low: float | None = None
    al_ci_high: float | None = None
    speedup: float | None = None
    al_se: float | None = None
    num_prompts: int | None = None
    breakdowns: Breakdowns = Field(default_factory=Breakdowns)  # the segment breakdown only
    sampling_p_value: float | None = None
    per_position_floors: list[float] | None = None
    segment_floors: dict[str, float] | None = None

    @property
    def setting(self) -> Setting:
        return (self.suite, self.k, self.concurrency, self.temperature, float(self.request_rate or 0.0))

    @classmethod
    def of_row(cls, row: CellRow) -> BaselineCell:
        """The baseline cell of a run's row (no floors yet)."""
        kept = {c: getattr(row, c) for c in BASELINE_COLUMNS if c not in _BASELINE_SEGMENT}
        segment = Breakdown([Bucket(label=b.label, al=b.al) for b in row.breakdowns.segment.buckets])
        return cls.model_validate({**kept, "breakdowns": Breakdowns(segment=segment)})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A cell as baseline.json stores it (flat columns; older files lack newer columns)."""
        d = dict(data)
        if not isinstance(d.get("breakdowns"), Breakdowns):
            d["breakdowns"] = Breakdowns.from_flat(data, only=("segment",))
        return lenient_model(cls, d)

    def to_dict(self) -> dict[str, Any]:
        # a closed-loop cell (rate 0) is written as baselines were before open-loop cells existed
        segment = self.breakdowns.flat(only=("segment",))
        out = {
            c: segment[c] if c in _BASELINE_SEGMENT else getattr(self, c)
            for c in BASELINE_COLUMNS
            if c != "request_rate" or self.request_rate
        }
        out["per_position_floors"] = self.per_position_floors
        if self.segment_floors is not None:
            out["segment_floors"] = self.segment_floors
        return out


class BaselineCrossover(BaseModel):
    """A baseline's crossover concurrency of one (draft, suite, k, temperature) line
    (harness/results/gate/)."""

    model_config = ConfigDict(frozen=True)

    draft: str
    suite: str
    k: int
    temperature: float
    concurrencies: list[int]
    where: str
    crossover: float | None
    text: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return lenient_model(cls, dict(data))


class BaselineFile(BaseModel):
    """baseline.json: the cells and crossovers a gate holds a run to, and the requirements stored
    with them (None: not stored, the gate's default applies)."""

    format: int | None
    source_run_id: str | None
    tolerance: float | None
    cells: list[BaselineCell]
    crossovers: list[BaselineCrossover] = []
    created_at: str | None = None
    max_crossover_drop: float | None = None
    lossless: str | None = None
    sampling_p_floor: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = {name: data.get(name) for name in cls.model_fields if name in data}
        known["cells"] = [BaselineCell.from_dict(c) for c in data.get("cells") or [] if isinstance(c, Mapping)]
        crossovers = data.get("crossovers") or []
        known["crossovers"] = [BaselineCrossover.from_dict(c) for c in crossovers if isinstance(c, Mapping)]
        return lenient_model(cls, known)

    def to_dict(self) -> dict[str, Any]:
        """The fields set (None: not stored), each cell as its BASELINE_COLUMNS and floors."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "cells":
                value = [c.to_dict() for c in self.cells]
            elif name == "crossovers":
                value = [c.model_dump() for c in self.crossovers]
            if value is not None:
                out[name] = value
        return out
