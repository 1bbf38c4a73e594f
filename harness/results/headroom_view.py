"""headroom.json (harness/headroom.py) as report blocks: the draft's cells on the engine's fitted
cost, the best k per load, the AL a target speedup needs, the published Kimi-K2.5 AL replayed, and
the plot of speedup against AL per load. The same blocks make headroom.md / headroom.html beside the
sweep and the "Headroom" section of a bench run's report when the sweep ran into that run's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.results.report_document import Block, Bullets, Document, Image, Section, Table
from harness.ui import fmt, fmt_ci

HEADROOM_JSON = "headroom.json"
HEADROOM_PNG = "headroom.png"
NOTE = (
    "Synthetic rows probe the engine's cost (vLLM's synthetic acceptance, the draft running); they are "
    "never results. Allowed: the speedup the fitted step cost gives at the cell's measured acceptance "
    "(tokens per request-step); efficiency = measured ÷ allowed."
)


def _x(v: list[float]) -> str:
    return f"{fmt(v[0], 2)}{fmt_ci(v[1], v[2])}"


def cells_table(found: dict[str, Any]) -> Table:
    rows = []
    for d in found["draft_cells"]:
        g = d["gap"]
        rows.append(
            [
                str(d["k"]),
                str(d["concurrency"]),
                fmt(d["acceptance_length"], 2),
                _x(d["measured_speedup"]),
                _x(d["allowed_speedup"]),
                f"{d['efficiency']:.0%}",
                "yes" if d["prediction_within_measured_ci"] else "no",
                f"{g['verify_overhead']:.2f} / {g['draft_cost']:.2f} / {g['rest']:.2f}",
            ]
        )
    cols = ["k", "conc.", "AL", "measured ×", "allowed × (fit)", "efficiency", "in CI", "verify / draft / rest"]
    return Table(cols, rows)


def summary_lines(found: dict[str, Any]) -> list[str]:
    """The validation share, the fit's terms, the best k per load and the schedule, in words."""
    n, share = len(found["draft_cells"]), found["within_ci_share"]
    ci = found["fit"]["coef_ci95"]
    terms = ", ".join(f"{k} {v[0] * 1e3:.2f} [{v[1] * 1e3:.2f}, {v[2] * 1e3:.2f}] ms" for k, v in ci.items())
    lines = [
        f"predicted speedup within the measured CI: {round(share * n)} of {n} cells ({share:.0%}); "
        f"median |allowed / measured - 1| {found.get('median_abs_error') or float('nan'):.1%}; "
        f"fit residual {found['fit']['rms_rel_residual']:.1%} RMS",
        f"step cost fit: {terms} (a term whose CI crosses 0 leaves the verify/draft split within noise)",
    ]
    for row in found["best_k"]:
        lines.append(
            f"concurrency {row['concurrency']}: best k predicted {row['predicted_best_k']}"
            f"{'' if row['predicted_clear'] else ' (within noise)'}, measured {row['measured_best_k']}"
            f"{'' if row['measured_apart_beyond_noise'] else ' (within noise)'}"
        )
    lines.append(f"num_speculative_tokens_per_batch_size: {found['k_schedule']}")
    machine = found.get("machine") or {}
    if machine.get("busy_engines"):
        lines.append(
            f"MACHINE BUSY: other processes used more than {machine['limit']:.0%} of the CPUs while "
            f"{', '.join(machine['busy_engines'])} ran (at most {machine['foreign_cpu_max']:.0%}): contention slows "
            "a speculative batch more than its baseline pair, so the fit and the cells are not the quiet machine's; "
            "rerun on a quiet machine"
        )
    elif machine.get("foreign_cpu_max") is not None:
        busiest = machine["foreign_cpu_max"]
        lines.append(f"machine: other processes used at most {busiest:.0%} of the CPUs during any engine")
    return lines


def al_for_table(found: dict[str, Any]) -> Table:
    rows = []
    for a in found["al_for_target"]:
        al = a["al"]
        reach = "yes" if al[0] <= a["k"] + 1 else f"no (beyond k + 1 = {a['k'] + 1})"
        rows.append([f"{a['target_speedup']:g}×", str(a["k"]), str(a["concurrency"]), _x(al), reach])
    return Table(["target", "k", "conc.", "AL needed", "reachable at k"], rows)


def published_table(rows: list[dict[str, Any]]) -> Table:
    """One row per published figure, this system's speedup at each load beside it (* : k outside
    the sweep, the fit extrapolated)."""
    loads = sorted({r["concurrency"] for r in rows})
    figures: dict[tuple, dict[int, dict[str, Any]]] = {}
    for r in rows:
        figures.setdefault((r["draft"], r["dataset"], r["setup"], r["k"], r["published_al"]), {})[r["concurrency"]] = r
    out = []
    for (draft, dataset, setup, k, al), at in figures.items():
        here = [_x(at[c]["speedup_here"]) + (" *" if at[c]["extrapolated"] else "") for c in loads]
        out.append([draft.split("/")[-1], dataset, setup, str(k), fmt(al, 2), *here])
    return Table(["draft", "dataset", "setup", "k", "published AL", *(f"× at conc. {c}" for c in loads)], out)


def blocks(found: dict[str, Any], image: str | None) -> list[Block]:
    body: list[Block] = [Bullets([NOTE, *summary_lines(found)]), cells_table(found)]
    if image:
        body.append(Image(image, "speedup against AL per load: the fit (95 % band), synthetic ○ and draft ■ cells"))
    body.append(Section("AL a target speedup needs", [al_for_table(found)], level=3))
    if found["published"]:
        title = "Published Kimi-K2.5 acceptance on this system (the fit at the published AL and k; * extrapolated)"
        body.append(Section(title, [published_table(found["published"])], level=3))
    return body


def write_headroom_pages(found: dict[str, Any], folder: Path) -> Path:
    """headroom.png, headroom.md and headroom.html in `folder` (beside headroom.json); the HTML page."""
    from harness.analysis.headroom import CostFit
    from harness.provenance import atomic_write_text
    from harness.results.plots import plot_headroom
    from harness.results.report_document import to_html, to_markdown

    plot_headroom(CostFit.from_dict(found["fit"]), found, folder / HEADROOM_PNG)
    doc = Document("Headroom: the speedup this engine allows, and the draft on it", blocks(found, HEADROOM_PNG))
    atomic_write_text(folder / "headroom.md", to_markdown(doc))
    atomic_write_text(folder / "headroom.html", to_html(doc, folder))
    return folder / "headroom.html"
