"""The report's PNG plots (matplotlib, Agg: no display). Each function takes a run's rows, writes
one PNG and returns its title (the data selection is stated in it), or writes nothing and returns
None when the data does not support the plot: no finished cell; AL vs k with fewer than two k;
speedup vs concurrency with fewer than two concurrencies (harness/results/load_view.py's rule).

Reference setting: T = 0 and concurrency 1 when the run has them, else the lowest measured.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import cast

from harness.provenance import atomic_write_bytes
from harness.results.load_view import enough_ks, enough_load_points
from harness.results.runs import closed_loop
from harness.schema import BASELINE, BreakdownName, CellRow

Row = CellRow


def _tok_s(row: Row | None) -> float:
    return (row.output_tok_per_s if row else None) or 0.0


# ----------------------------------------------------------------------------- selection (pure)


def spec_rows(rows: list[Row]) -> list[Row]:
    return [r for r in closed_loop(rows) if r.is_speculative and r.acceptance_length is not None]


def reference(rows: list[Row]) -> tuple[float | None, int | None]:
    """(temperature, concurrency) of the reference setting: 0 and 1 when measured, else the lowest."""
    spec = spec_rows(rows)
    if not spec:
        return None, None
    temps = {r.temperature for r in spec}
    t = 0.0 if 0 in temps else min(temps)
    concs = {r.concurrency for r in spec if r.temperature == t}
    return t, 1 if 1 in concs else min(concs)


def series(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows by line label: the suite, or 'suite · draft' when the run holds several drafts."""
    multi = len({r.draft for r in rows}) > 1
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        out[f"{r.suite} · {r.draft}" if multi else str(r.suite)].append(r)
    return dict(sorted(out.items()))


def by_what(rows: list[Row]) -> str:
    return "suite and draft" if len({r.draft for r in rows}) > 1 else "suite"


def reference_cells(rows: list[Row]) -> dict[str, Row]:
    """Per line label: the speculative row at the reference T and concurrency with the largest k."""
    t, c = reference(rows)
    ref = [r for r in spec_rows(rows) if r.temperature == t and r.concurrency == c]
    return {label: max(rs, key=lambda r: r.k) for label, rs in series(ref).items()}


def first_below(points: list[tuple[float, float]], threshold: float = 1.0) -> tuple[float, float] | None:
    """The first (x, y) with y < threshold, in x order."""
    return next(((x, y) for x, y in sorted(points) if y < threshold), None)


def _k_text(cells: dict[str, Row]) -> str:
    ks = sorted({r.k for r in cells.values()})
    return f"k={ks[0]}" if len(ks) == 1 else "largest k per suite, k=" + "/".join(map(str, ks))


def _setting(t: float | None, c: int | None) -> str:
    return "no finished cell" if t is None else f"T={t:g}, concurrency {c}"


# ----------------------------------------------------------------------------- drawing


def _figure():
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg canvas on save

    fig = Figure(figsize=(8, 4.8), dpi=110, layout="constrained")
    return fig, fig.add_subplot()


def _color(i: int):
    from matplotlib import colormaps

    return colormaps["tab10"](i % 10)


def _save(fig, ax, path: Path, title: str, note: str | None = None) -> str:
    title = f"{title}\n{note}" if note else title
    ax.set_title(title, fontsize=10.5)
    _write_png(fig, path)
    return title


def _write_png(fig, path: Path) -> None:
    """Rendered first, then written atomically: a full disk leaves no truncated PNG behind for the
    report to embed, and says how big the PNG is."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())


def plot_per_position(rows: list[Row], path: Path, note: str | None = None) -> str | None:
    cells = reference_cells(rows)
    if not cells:
        return None
    t, c = reference(rows)
    fig, ax = _figure()
    title = (
        f"Per-position acceptance rate by {by_what(rows)} ({_k_text(cells)}, {_setting(t, c)})\n"
        "rate(i) = drafts whose token at position i was accepted / drafts"
    )
    for i, (label, r) in enumerate(cells.items()):
        rates = r.per_position_rates or []
        ax.plot(range(1, len(rates) + 1), rates, marker="o", color=_color(i), label=f"{label} (k={r.k})")
    ks = [r.k for r in cells.values()]
    ax.set_xticks(range(1, max(ks, default=1) + 1))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("draft position i")
    ax.set_ylabel("acceptance rate at position i (fraction of drafts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, ax, path, title, note)


def plot_al_vs_k(rows: list[Row], path: Path, note: str | None = None) -> str | None:
    t, c = reference(rows)
    ref = [r for r in spec_rows(rows) if r.temperature == t and r.concurrency == c]
    ks = sorted({r.k for r in ref})
    if not enough_ks(ks):
        return None  # one k is a point, not a trend; the tables carry it
    fig, ax = _figure()
    for i, (label, rs) in enumerate(series(ref).items()):
        pts = sorted((r.k, r.acceptance_length) for r in rs)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=_color(i), label=label)
    ax.plot(ks, [k + 1 for k in ks], ls="--", color="0.4", label="ceiling k+1 (every draft token accepted)")
    ax.set_xticks(ks)
    ax.set_ylim(bottom=1.0)
    ax.legend(fontsize=8)
    ax.set_xlabel("k = num_speculative_tokens (draft tokens per verify step)")
    ax.set_ylabel("acceptance length (tokens per verify step, incl. bonus)")
    ax.grid(alpha=0.3)
    title = (
        f"Acceptance length vs k by {by_what(rows)} ({_setting(t, c)})\n"
        "AL = 1 + accepted / drafts (pooled); dashed: the k+1 ceiling"
    )
    return _save(fig, ax, path, title, note)


def _speedup_line(ax, krs: list[Row], color, ls, label: str) -> tuple[float, float] | None:
    """One k's speedup line with its CI band; returns the interpolated crossover point, if any."""
    from harness.analysis.load import CROSSES, crossing

    krs = sorted(krs, key=lambda r: r.concurrency)
    xs, ys = [r.concurrency for r in krs], [r.speedup for r in krs]
    ax.plot(xs, ys, marker="o", color=color, ls=ls, label=label)
    lows, highs = [r.speedup_ci_low for r in krs], [r.speedup_ci_high for r in krs]
    if all(v is not None for v in lows + highs):
        ax.fill_between(xs, lows, highs, color=color, alpha=0.15, lw=0)
    if not enough_load_points(xs):
        return None  # one load point has no crossover
    cross = crossing(xs, [cast(float, y) for y in ys])  # every row here has a speedup (the caller's filter)
    # a crossing has its concurrency
    return (cast(float, cross.concurrency), 1.0) if cross.where == CROSSES else None


def plot_speedup_vs_concurrency(rows: list[Row], path: Path, note: str | None = None) -> str | None:
    t, _ = reference(rows)
    ref = [r for r in spec_rows(rows) if r.temperature == t and r.speedup is not None]
    concs = sorted({r.concurrency for r in ref})
    if not enough_load_points(concs):
        return None  # one concurrency is no axis; the speedups are in the tables and the tok/s plot
    fig, ax = _figure()
    ax.axhline(1.0, color="0.3", lw=1, ls="--", label="1.0x (no gain)")
    notes = 0  # annotations so far: stacked in the lower left, arrows to their points
    for i, (label, rs) in enumerate(series(ref).items()):
        by_k: dict[int, list[Row]] = defaultdict(list)
        for r in rs:
            by_k[r.k].append(r)
        for j, (k, krs) in enumerate(sorted(by_k.items())):
            cross = _speedup_line(ax, krs, _color(i), ["-", ":", "-.", (0, (5, 1))][j % 4], f"{label}, k={k}")
            if cross:
                ax.plot(*cross, marker="X", ms=11, color="crimson", zorder=5)
                ax.annotate(
                    f"{label}, k={k}: crossover at concurrency {cross[0]:.3g}",
                    cross,
                    fontsize=8,
                    xytext=(0.02, 0.04 + 0.07 * notes),
                    textcoords="axes fraction",
                    color="crimson",
                    bbox=dict(fc="white", ec="none", alpha=0.85),
                    arrowprops=dict(arrowstyle="->", color="crimson", lw=0.7, alpha=0.7),
                )
                notes += 1
    _concurrency_axis(ax, concs)
    ax.set_ylabel("speedup (× baseline output tokens/s)")
    ax.legend(fontsize=8)
    title = (
        f"Speedup vs concurrency by {by_what(rows).replace(' and ', ', ')} and k (T={t:g})\n"
        "speedup = spec ÷ baseline output tok/s; band: 95% CI; red X: crossover at 1.0x (log2 interp.)"
    )
    return _save(fig, ax, path, title, note)


def _concurrency_axis(ax, concs: list[int]) -> None:
    if concs and concs[-1] / concs[0] >= 4:
        ax.set_xscale("log", base=2)
    if concs:
        ax.set_xticks(concs, [str(c) for c in concs])
        ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")
    ax.grid(alpha=0.3)


def plot_al_breakdown(rows: list[Row], path: Path, note: str | None = None) -> str | None:
    """AL by output position, by prompt length and (when outputs think) by thinking/answer
    segment, reference cells; None when no cell has them."""
    cells = {lab: r for lab, r in reference_cells(rows).items() if r.breakdowns.output_position.measured()}
    if not cells:
        return None
    from matplotlib.figure import Figure

    whats: list[BreakdownName] = ["output_position", "prompt_length"]
    if any(r.breakdowns.segment.measured() for r in cells.values()):
        whats.append("segment")
    fig = Figure(figsize=(5 * len(whats), 4.4), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(whats))
    for ax, what in zip(axes, whats):
        for i, (label, r) in enumerate(cells.items()):
            pts = r.breakdowns.of(what).measured()
            ax.plot(
                [n for n, *_ in pts],
                [v for _, v, *_ in pts],
                marker="o",
                color=_color(i),
                label=f"{label} (k={r.k})",
            )
        ax.set_xlabel(
            {
                "output_position": "output position (output tokens)",
                "prompt_length": "prompt length (tokens)",
                "segment": "segment (thinking / answer, split at </think>)",
            }[what]
        )
        ax.set_ylabel("acceptance length")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    t, c = reference(rows)
    title = (
        f"Acceptance length along the output, by prompt length and by segment ({_setting(t, c)})\n"
        "AL = 1 + accepted / drafts of the verify steps in each bucket (vLLM's per-step record)"
    )
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=10.5)
    _write_png(fig, path)
    return title


def plot_throughput(rows: list[Row], path: Path, note: str | None = None) -> str | None:
    cells = reference_cells(rows)
    if not cells:
        return None
    base = {r.cell_id: r for r in rows if r.mode == BASELINE}
    t, c = reference(rows)
    fig, ax = _figure()
    labels = list(cells)
    spec_v = [cells[lab].output_tok_per_s or 0.0 for lab in labels]
    base_v = [_tok_s(base.get(cells[lab].cell_id)) for lab in labels]
    x = range(len(labels))
    w = 0.38
    b1 = ax.bar([i - w / 2 for i in x], base_v, w, label="baseline (no speculation)", color="0.6")
    b2 = ax.bar([i + w / 2 for i in x], spec_v, w, label="speculative", color=_color(0))
    ax.bar_label(b1, fmt="%.1f", fontsize=8)
    ax.bar_label(
        b2, labels=[f"{s:.1f}\n({s / b:.2f}x)" if b else f"{s:.1f}" for s, b in zip(spec_v, base_v)], fontsize=8
    )
    ax.set_xticks(list(x), [f"{lab}\n(k={cells[lab].k})" for lab in labels])
    ax.set_ylabel("output tokens/s (output tokens ÷ wall s)")
    ax.set_xlabel(by_what(rows))
    ax.margins(y=0.18)
    ax.legend(fontsize=8)
    title = f"Output tokens/s, baseline vs speculative, by {by_what(rows)} ({_k_text(cells)}, {_setting(t, c)})"
    return _save(fig, ax, path, title, note)


PLOTS = (
    ("per_position_acceptance.png", plot_per_position),
    ("acceptance_length_vs_k.png", plot_al_vs_k),
    ("speedup_vs_concurrency.png", plot_speedup_vs_concurrency),
    ("output_tok_per_s.png", plot_throughput),
    ("acceptance_breakdown.png", plot_al_breakdown),
)


def write_plots(rows: list[Row], folder: Path, note: str | None = None) -> list[tuple[Path, str]]:
    """The plots the data supports: [(png path, title)]; `note` (e.g. what a killed run lacks)
    joins every title."""
    made = [(folder / name, fn(rows, folder / name, note)) for name, fn in PLOTS]
    return [(path, title) for path, title in made if title]


def plot_rate_sweep(line, bounds: dict[str, float], path: Path, note: str | None = None) -> str:
    """One open-loop line (harness/results/slo_view.RateLine): achieved vs offered rate per arm
    (the saturation point is where an arm leaves the diagonal), and beside it each arm's worst
    p99 / SLO bound (bench.slo; <= 1 meets, the SLO rate is where it crosses 1) or, without an
    SLO, its p99 TPOT."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.4), dpi=110, layout="constrained")
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    rates = list(line.rates)
    arms = (("baseline (no speculation)", line.baseline, "0.45"), ("speculative", line.speculative, _color(0)))
    left.plot(rates, rates, ls=":", color="0.7", label="offered = achieved")
    for i, (label, rows, color) in enumerate(arms):
        left.plot(rates, [r.achieved_rate or 0.0 for r in rows], "o-", color=color, label=label)
        if line.slo is not None:
            scores = (line.slo.baseline, line.slo.speculative)[i].scores
            right.plot(rates, list(scores), "o-", color=color, label=label)
        else:
            right.plot(rates, [r.tpot_ms_p99 or 0.0 for r in rows], "o-", color=color, label=label)
    left.set_xlabel("offered rate (requests/s)")
    left.set_ylabel("achieved rate (finished requests ÷ wall s)")
    left.legend(fontsize=8)
    right.set_xlabel("offered rate (requests/s)")
    if line.slo is not None:
        right.axhline(1.0, ls="--", color="0.3", lw=1)
        right.set_ylabel("worst p99 ÷ SLO bound (≤ 1 meets)")
    else:
        right.set_ylabel("p99 TPOT (ms)")
    right.legend(fontsize=8)
    slo_part = ", ".join(f"{m.upper()} ≤ {v * 1000:g} ms" for m, v in bounds.items()) or "no SLO stated"
    return _save(fig, left, path, f"Open-loop load, {line.key} ({slo_part})", note)


def plot_headroom(fit, found: dict, path: Path) -> str:
    """Speedup against AL, one panel per load: per k the fitted curve (the speedup the engine
    allows, harness/analysis/headroom.py) with its 95 % band, the synthetic cells it was fitted to
    (hollow) and the draft's measured cells with their CIs (filled) — how far the draft sits from
    what its acceptance allows."""
    import numpy as np
    from matplotlib.figure import Figure

    loads = list(fit.concurrencies)
    ks = [k for k in fit.ks if k > 0]
    fig = Figure(figsize=(4.2 * len(loads), 4.4), dpi=110, layout="constrained")
    axes = [fig.add_subplot(1, len(loads), i + 1) for i in range(len(loads))]
    for ax, c in zip(axes, loads, strict=True):
        for i, k in enumerate(ks):
            color = _color(i)
            al = np.linspace(1.0, k + 1.0, 40)
            est = [fit.speedup(float(a), k, c) for a in al]
            ax.plot(al, [e.value for e in est], color=color, label=f"k={k} fit")
            ax.fill_between(al, [e.lo for e in est], [e.hi for e in est], color=color, alpha=0.15, lw=0)
            syn = [s for s in found["synthetic_cells"] if s["k"] == k and s["concurrency"] == c]
            ax.plot(
                [s["tokens_per_step"] for s in syn],
                [s["measured_speedup"][0] for s in syn],
                "o",
                mfc="none",
                color=color,
            )
            for d in (d for d in found["draft_cells"] if d["k"] == k and d["concurrency"] == c):
                m = d["measured_speedup"]
                err = [[m[0] - m[1]], [m[2] - m[0]]] if np.isfinite(m[1]) else None
                ax.errorbar([d["tokens_per_step"]], [m[0]], yerr=err, fmt="s", color=color, ms=7, capsize=3)
        ax.axhline(1.0, color="0.6", ls=":", lw=1)
        shown = [fit.speedup(k + 1.0, k, c).value for k in ks]
        shown += [d["measured_speedup"][0] for d in found["draft_cells"] if d["concurrency"] == c]
        ax.set_ylim(0, 1.4 * max(shown))  # a wide CI runs off the panel rather than flattening it
        ax.set_xlabel("acceptance length (tokens per request-step)")
        ax.set_title(f"concurrency {c}", fontsize=10)
    axes[0].set_ylabel("speedup over no speculation (×)")
    axes[0].legend(fontsize=8, title="○ synthetic  ■ draft", title_fontsize=8)
    title = "headroom: the speedup this engine allows at each AL (fit, 95 % band) and the draft's cells"
    fig.suptitle(title, fontsize=10.5)
    _write_png(fig, path)
    return title
