"""One gate check: a metric of one cell (or one crossover line) against its bound."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results.runs import describe_setting
from harness.ui import fmt


@dataclass(frozen=True)
class Check:
    suite: str
    k: int
    concurrency: int | str  # str: a check across the concurrency grid (gate/crossover_checks.ACROSS)
    temperature: float
    metric: str
    baseline: float | None
    value: float | None
    bound: float
    passed: bool
    compared: float | None = None  # what was held against the bound (value + noise slack when noise-aware)
    draft: str = ""
    min_detectable_drop: float | None = None  # relative; AL checks only (module docstring: Power)
    power_warning: str | None = None
    detail: str | None = None  # a non-numeric check's own sentence (lossless)
    request_rate: float = 0.0  # the cell's offered rate (0: closed loop)

    @property
    def where(self) -> str:
        return describe_setting((self.suite, self.k, self.concurrency, self.temperature, self.request_rate))

    def message(self) -> str:
        if self.detail:
            return f"{self.where}: {self.metric}: {self.detail}"
        op = ">=" if self.passed else "<"
        ci = f" (CI upper end {fmt(self.compared)})" if self.compared not in (None, self.value) else ""
        value = fmt(self.value) if self.value is not None else "none (no drafts: speculation off?)"
        return f"{self.where}: {self.metric} {value}{ci} {op} bound {fmt(self.bound)} (baseline {fmt(self.baseline)})"
