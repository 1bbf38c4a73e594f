"""The cost table as the dry run prints it, and the rehearsal's with what it measured beside the
model's prediction (harness/plan/cost_measured.py); the hidden-state modes side by side and every
figure with its source.
"""

from __future__ import annotations

from typing import Any

from harness.plan.cost import HOUR
from harness.plan.figures import figure_value
from harness.ui import MISSING, fmt


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 2 * HOUR else f"{seconds / HOUR:,.1f} h"


def _work_cell(stage: dict[str, Any]) -> str:
    """The work, what bounds it, and with several concurrencies the time each takes."""
    from rich.markup import escape

    text = escape(stage["work"])
    timed = [p for p in stage.get("parts", ()) if p["in_flight"] is not None and p["tokens"]]
    if len(timed) > 1:
        text += (
            "\n[dim]by requests in flight: "
            + " · ".join(f"{_in_flight(p)}: {duration(p['wall_s'])}" for p in timed)
            + "[/]"
        )
    return text + (f"\n[dim]{escape(stage['note'])}[/]" if stage.get("note") else "")


def _in_flight(part: dict[str, Any]) -> str:
    return f"{part['label']} ({part['in_flight']})" if part.get("label") else str(part["in_flight"])


def render_cost(section: dict[str, Any], console) -> None:
    """The cost table (the dry run's, or the rehearsal's with what it measured), the hidden-state
    modes side by side, and every figure with its source."""
    measured = any("measured" in s for s in section["stages"])
    console.print(_measured_table(section) if measured else _plan_table(section))
    if share := section["total"].get("gpu_h_share"):
        text = " · ".join(f"{stage} {v:.0%}" for stage, v in share.items())
        console.print(f"GPU-hours by stage: {text}", highlight=False)
    _render_modes(section.get("hidden_states_by_mode") or {}, console)
    _render_assumptions(section["assumptions"], console)
    console.print(f"not counted: {section['not_counted']}", highlight=False, soft_wrap=True, markup=False)


def _plan_table(section: dict[str, Any]):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"what the plan costs ({section['model']})"), title_justify="left")
    for col in ("stage", "work", "figure", "hours", "GPUs", "GPU-hours"):
        table.add_column(col, overflow="fold", justify="right" if col in ("hours", "GPUs", "GPU-hours") else "left")
    for s in section["stages"]:
        gpu_h = fmt(s["gpu_h"], "{:,.1f}")
        table.add_row(
            s["stage"], _work_cell(s), escape(s["figure"]), duration(s["wall_s"]), fmt(s["gpus"] or None), gpu_h
        )
    tot = section["total"]
    gpu_total = fmt(tot["gpu_h"], "{:,.1f}")
    incomplete = "" if tot["complete"] else " (a figure is missing)"
    table.add_row("total", "", "", f"{duration(tot['wall_s'])}{incomplete}", "", gpu_total, style="bold")
    return table


def _measured_table(section: dict[str, Any]):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"what the run cost, measured vs the model ({section['model']})"), title_justify="left")
    cols = ("stage", "work (measured)", "figure", "predicted", "measured", "measured tok/s", "measured / predicted")
    for col in cols:
        table.add_column(col, overflow="fold", justify="left" if col in cols[:3] else "right")
    for s in section["stages"]:
        m = s.get("measured") or {}
        ratio = fmt(m.get("ratio"), "{:.2f}")
        plan = f"\n[dim]the plan: <= {m['planned_tokens']:,} tokens[/]" if m.get("planned_tokens") else ""
        table.add_row(
            s["stage"],
            _work_cell(s) + plan,
            escape(s["figure"]),
            duration(s["wall_s"]),
            duration(m.get("wall_s")),
            MISSING if m.get("tok_s") is None else figure_value(m["tok_s"]),
            ratio,
        )
    tot = section["total"]
    measured = tot.get("measured_wall_s")
    ratio = f"{measured / tot['wall_s']:.2f}" if measured and tot["wall_s"] else MISSING
    table.add_row("total", "", "", duration(tot["wall_s"]), duration(measured), "", ratio, style="bold")
    return table


def _render_modes(modes: dict[str, Any], console) -> None:
    for mode in ("offline", "online"):
        m = modes.get(mode)
        planned = " (planned)" if modes.get("planned") == mode else ""
        if isinstance(m, dict):
            gpu_h = "" if m["gpu_h"] is None else f", {m['gpu_h']:,.1f} GPU-hours"
            console.print(
                f"hidden states {mode}{planned}: {m['disk_gib']:,} GiB on disk, extraction "
                f"{duration(m['extraction_s'])}{gpu_h}",
                highlight=False,
            )
        elif m:
            console.print(f"hidden states {mode}: {m}", highlight=False, markup=False)


def _render_assumptions(assumptions: list[dict[str, Any]], console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="figures and their sources", title_justify="left")
    for col in ("figure", "value", "unit", "basis", "source"):
        table.add_column(col, overflow="fold")
    for a in assumptions:
        value = MISSING if a["value"] is None else figure_value(a["value"])
        table.add_row(a["key"], value, a["unit"], a["basis"], escape(a["source"]))
    console.print(table)
