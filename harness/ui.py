"""Output for people: progress (one rich display across stages, on stderr: pipelines talk to a
`Reporter`, tests use the silent one), the consoles, the one number formatter (`fmt`; `fmt_ci` for a
CI after its value) and the one Markdown table (`md_table`)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import TaskID


class Reporter:
    """Silent reporter (the interface). Every reporter keeps the wall time of each stage, so a
    run can say where its time went (`timings`, in order, seconds)."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self._stage: tuple[str, float] | None = None

    def stage(self, name: str, total: int | None = None, unit: str = "") -> None:
        self._end_stage()
        self._stage = (name, time.perf_counter())

    def _end_stage(self) -> None:
        stage: tuple[str, float] | None = getattr(self, "_stage", None)
        if stage is not None:
            name, t0 = stage
            self.timings.append((name, time.perf_counter() - t0))
            self._stage = None

    def advance(self, n: int = 1, **fields: Any) -> None: ...

    def done(self, summary: str = "") -> None:
        self._end_stage()

    def log(self, message: str) -> None: ...

    def close(self) -> None:
        self._end_stage()


class RichReporter(Reporter):
    def __init__(self, title: str = "harness"):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        super().__init__()
        self.console = stderr_console()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console,
            transient=False,
        )
        self.progress.start()
        self.task: TaskID | None = None
        self.t0 = time.perf_counter()
        self.title = title

    def stage(self, name: str, total: int | None = None, unit: str = "") -> None:
        self.done()
        super().stage(name, total, unit)
        self.task = self.progress.add_task(name, total=total, info="")

    def advance(self, n: int = 1, **fields: Any) -> None:
        if self.task is None:
            return
        info = "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in fields.items())
        extra: dict[str, Any] = {"info": info} if fields else {}
        self.progress.update(self.task, advance=n, **extra)

    def done(self, summary: str = "") -> None:
        super().done(summary)
        if self.task is not None:
            t = self.progress.tasks[-1]
            # Called from a `finally` while an error or interrupt unwinds: the bar keeps the count
            # actually reached, so it never shows work done that was not.
            stopped = sys.exc_info()[0]
            if stopped is not None:
                why = "interrupted" if issubclass(stopped, KeyboardInterrupt) else "failed"
                self.progress.update(
                    self.task,
                    info=f"[red]{why}[/] at {int(t.completed)}" + (f"/{int(t.total)}" if t.total is not None else ""),
                )
            elif t.total is None:
                self.progress.update(self.task, total=t.completed or 1, completed=t.completed or 1)
            else:
                self.progress.update(self.task, completed=t.total)
            if summary:
                self.progress.update(self.task, info=summary)
            self.task = None

    def log(self, message: str) -> None:
        from rich.markup import escape

        # escaped: a cell's log line starts with "[<cell id>]", which rich would take for a style
        self.progress.console.print(f"[dim]{escape(message)}[/]", highlight=False)

    def close(self) -> None:
        self.done()
        super().close()
        self.progress.stop()


def stdout_console():
    """Tables for people. Wide when piped (CI logs), since rich assumes 80 columns there."""
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 200)


def stderr_console():
    from rich.console import Console

    return Console(stderr=True)


MISSING = "—"  # the one mark of a missing value, in every table, report and summary


def fmt(value: Any, spec: int | str = 3) -> str:
    """The one number formatter: MISSING for None or NaN. `spec` is either a number of decimals (floats get
    them; ints and labels print as they are: fmt(3) is "3") or a format string such as "{:.2f}x" (applied
    to ints and floats alike: fmt(3, "{:.2f}") is "3.00")."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(spec, int):
        return f"{value:.{spec}f}" if isinstance(value, float) else str(value)
    return spec.format(value) if isinstance(value, int | float) else str(value)


def fmt_ci(low: float | None, high: float | None, spec: int | str = "{:.2f}") -> str:
    """A 95% CI as it follows its value in a table: " [low, high]" (each end through `fmt`), or "" unless
    both ends are known (neither None nor NaN)."""
    missing = fmt(low) == MISSING or fmt(high) == MISSING  # None or NaN
    return "" if missing else f" [{fmt(low, spec)}, {fmt(high, spec)}]"


# The setting a results table row stands for, as its first columns (the gate's checks, the published figures).
SETTING_HEADERS = ["suite", "draft", "k", "concurrency", "T"]


def md_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The one Markdown table (a pipe table: header, rule, a line per row), as lines. Cells are text
    already formatted (`fmt`); a '|' inside one is escaped, so it cannot split its cell."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(columns), "|" + "---|" * len(columns), *(line(r) for r in rows)]
