"""`harness report`: one run as report.md + a self-contained report.html (plots embedded as
base64 PNG data URIs) + the PNGs themselves. The content is built once, as a typed document
(harness/results/report_document.py), whose Markdown is both files' text, so the two always say
the same thing. Every number's definition is stated (harness/metrics.py).

Order: the answer first. A verdict (per suite and draft: faster or not, speedup and AL with their
CIs; the gate's result when the run folder holds one; what to distrust), then the flags in detail
and the run's facts, then the tables and plots the data supports (harness/results/load_view.py),
and the definitions last.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.analysis import slo
from harness.analysis.training_health import TrainingHealth
from harness.results import answer, cache_view, plots, slo_view
from harness.results import published as pub
from harness.results import report_sections as sections
from harness.results.report_document import (
    Block,
    Bullets,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
    to_html,
    to_markdown,
)
from harness.results.runs import Run, read_run
from harness.schema import BASELINE, CellRow
from harness.ui import MISSING, fmt, fmt_ci

# the main job's training report, beside its bench run (harness/main_job.py)
TRAIN_REPORT = Path("train") / "train_report.json"

DEFINITIONS = [
    "acceptance length (AL, τ) = 1 + num_accepted_tokens / num_drafts, pooled over every draft of the cell "
    "(vLLM's convention): tokens emitted per verify step including the verifier's bonus token; 1 … k+1",
    "AL 95% CI = bootstrap over requests (a request is the unit of independence), same pooled formula",
    "draft acceptance rate = num_accepted_tokens / num_draft_tokens = (AL − 1) / k, a fraction in [0, 1]",
    "per-position rate i = drafts whose token at position i was accepted / num_drafts (unconditional; "
    "non-increasing in i)",
    "output tok/s = output tokens of all requests / wall seconds of the measured batch",
    "speedup = speculative output tok/s ÷ baseline output tok/s, same prompts, max tokens, sampling, "
    "concurrency and parallelism",
    "lossless match = requests whose speculative output tokens equal the baseline's / requests compared (T=0 only)",
    "TTFT median = median time to first token over the cell's requests, milliseconds",
    "speedup 95% CI = bootstrap over the paired A/B repeats and, within them, the same requests in both arms "
    "(harness/analysis/load.py)",
    "faster? (verdict) = yes when the speedup's 95% CI lies wholly above 1.0x, no (slower) when wholly below, "
    "no clear difference when it spans 1.0x; without a CI the point value decides and the verdict says so. "
    "The verdict's cell: per suite and draft the highest speedup at the reference temperature",
    "crossover = the concurrency where speedup first falls below 1.0x, interpolated linearly in log2(concurrency) "
    "between the grid points around it; its CI = the crossings of the speedup CIs' lower and upper bounds; "
    "'above the grid' = never below 1.0x, 'below the grid' = already below at the lowest concurrency; "
    "'one load point' = measured at a single concurrency: no crossover (it needs at least two concurrencies)",
    "best k = at each concurrency the k with the highest output tok/s (k = 0: the baseline, no speculation), "
    "written as vLLM's speculative_config.num_speculative_tokens_per_batch_size (inclusive batch-size ranges); "
    "shown only from at least two concurrencies (from one it would be an extrapolation)",
    "AL by output position / prompt length = the same pooled AL over the verify steps in each bucket, from vLLM's "
    "per-step record (per_request_spec_decode_metrics='detailed'); CI over requests (harness/analysis/steps.py)",
    "deploy (which arm, per suite and load) = per suite, concurrency and T, the candidate arm at its fastest k; "
    "candidates: every draft and reference method except oracle (an upper bound) and random (a control), and no "
    "speculation at exactly 1.0x; margin = its speedup ÷ the runner-up's, clear when their 95% CIs do not overlap "
    "(harness/results/answer.py)",
    "tokens per step = decoded tokens ÷ decode steps, steps without a draft included (harness/metrics.py): "
    "ngram and suffix draft only where they find a match, and vLLM's AL counts only those steps",
    "repetition = share of the verifier's own output tokens inside an 8-gram that repeats one from the previous "
    "1024 tokens (harness/analysis/repetition.py); loops inflate every draft's AL",
]
VERDICT_HEADERS = ["suite", "draft", "faster?", "speedup [95% CI]", "AL [95% CI]", "at", "speedup over all cells"]
GATE_VERDICT = Path("gate") / "gate.json"  # where the main job writes the gate's verdict (harness/main_job.py)
FLAG_CELLS_SHOWN = 3  # cells named per flag in the verdict; the detail section names them all
MAX_RATE_PLOTS = 6  # one figure per open-loop line, the first few
CELL_HEADERS = [
    "k",
    "concurrency",
    "T",
    "AL",
    "AL 95% CI",
    "tokens per step",
    "draft acceptance rate",
    "per-position rates",
    "speedup (×) [95% CI]",
    "spec tok/s",
    "baseline tok/s",
    "spec TTFT median (ms)",
    "lossless match",
    "verifier repetition",
]


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    plots: tuple[Path, ...]


@dataclass(frozen=True)
class GateSummary:
    """The gate's verdict as the run folder holds it (gate/gate.json)."""

    baseline: str
    checks: int
    failures: tuple[str, ...]  # each failing check's message
    paired: str | None = None  # the three-way verdict line (docs/gate.md, "Paired gate"): paired, or inconclusive


# ----------------------------------------------------------------------------- cells and facts (pure)


def _ci(r: CellRow) -> str:
    lo, hi = r.al_ci_low, r.al_ci_high
    return MISSING if lo is None or hi is None else f"{lo:.3f} – {hi:.3f}"


def _rates(r: CellRow) -> str:
    return " / ".join(f"{x:.2f}" for x in r.per_position_rates or []) or MISSING


def _cell_row(r: CellRow, base: CellRow | None) -> list[str]:
    lm = r.lossless_match_rate
    n, m = r.lossless_compared, r.lossless_matches
    lm_s = (
        MISSING if lm is None else f"{lm:.1%} ({int(m)}/{int(n)})" if n is not None and m is not None else f"{lm:.1%}"
    )
    return [
        str(r.k),
        str(r.concurrency),
        f"{r.temperature:g}",
        fmt(r.acceptance_length),
        _ci(r),
        fmt(r.tokens_per_step),
        fmt(r.draft_acceptance_rate),
        _rates(r),
        fmt(r.speedup) + fmt_ci(r.speedup_ci_low, r.speedup_ci_high, "{:.3f}"),
        fmt(r.output_tok_per_s, 1),
        fmt(base.output_tok_per_s if base else None, 1),
        fmt(r.ttft_ms_median, 1),
        lm_s,
        fmt(r.repetition_share, "{:.0%}"),
    ]


def _run_facts(run: Run) -> list[str]:
    m = run.manifest
    hw, pk = m.hardware, m.packages
    facts = [
        f"status: {run.status}; started {m.started_at}, ended {m.ended_at or 'not recorded'}",
        f"harness git sha: {m.git_sha}",
        f"hardware: {hw.describe()}",
        "packages: " + (", ".join(f"{k} {v}" for k, v in pk.items()) or MISSING),
    ]
    facts += [f"verifier: {v.path} (content hash {v.content_hash})" for v in m.verifiers]
    for label, d in m.drafts.items():
        facts.append(f"draft {label}: {d.method or ''} {d.path} (content hash {d.content_hash})")
    rows = run.rows
    if rows:
        r0 = rows[0]
        facts.append(f"max tokens {r0.max_tokens}, repeats {r0.repeats}, engine {r0.engine}")
        suites = sorted({(r.suite, r.suite_version, r.suite_sha) for r in rows})
        facts.append("suites: " + ", ".join(f"{s} (version {v}, sha {h})" for s, v, h in suites))
    return facts


# ----------------------------------------------------------------------------- verdict (pure)


def faster_or_not(r: CellRow) -> str:
    """The verdict on one cell's speed (DEFINITIONS: faster?)."""
    sp, lo, hi = r.speedup, r.speedup_ci_low, r.speedup_ci_high
    if sp is None:
        return "not measured (no baseline arm)"
    if lo is None or hi is None:
        return ("yes" if sp > 1 else "no, slower" if sp < 1 else "no difference") + " (no CI: noise unknown)"
    return "yes" if lo > 1 else "no, slower" if hi < 1 else "no clear difference (CI spans 1.0x)"


def _x_ci(r: CellRow) -> str:
    sp, lo, hi = r.speedup, r.speedup_ci_low, r.speedup_ci_high
    if sp is None:
        return MISSING
    return f"{sp:.2f}x" + fmt_ci(lo, hi)


def _al_ci(r: CellRow) -> str:
    al, lo, hi = r.acceptance_length, r.al_ci_low, r.al_ci_high
    return fmt(al, 2) + fmt_ci(lo, hi)


def _spread(rs: list[CellRow]) -> str:
    sps = [r.speedup for r in rs if r.speedup is not None]
    if not sps:
        return MISSING
    if len(sps) == 1:
        return "one cell only"
    below = sum(s < 1 for s in sps)
    return f"{min(sps):.2f}–{max(sps):.2f}x over {len(sps)} cells" + (f", {below} below 1.0x" if below else "")


def verdict_cell(rs: list[CellRow], temperature: float | None) -> CellRow:
    """A suite-and-draft's verdict cell: the highest speedup at the reference temperature, else (no
    speedup measured) the largest k there."""
    at_t = [r for r in rs if r.temperature == temperature] or rs
    timed = [r for r in at_t if r.speedup is not None]
    if timed:
        return max(timed, key=lambda r: (r.speedup, -r.k, -r.concurrency))
    return max(at_t, key=lambda r: (r.k, -r.concurrency))


def verdict_rows(rows: list[CellRow]) -> list[list[str]]:
    spec = plots.spec_rows(rows)
    t, _ = plots.reference(rows)
    groups: dict[tuple[str, str], list[CellRow]] = {}
    for r in spec:
        groups.setdefault((str(r.suite), str(r.draft)), []).append(r)
    out = []
    for (suite, draft), rs in sorted(groups.items()):
        r = verdict_cell(rs, t)
        out.append(
            [
                suite,
                draft,
                faster_or_not(r),
                _x_ci(r),
                _al_ci(r),
                f"k={r.k}, c={r.concurrency}, T={r.temperature:g}",
                _spread(rs),
            ]
        )
    return out


def gate_line(gate: GateSummary | None) -> str:
    if gate is None:
        return f"Gate: not gated (no {GATE_VERDICT.as_posix()} in the run folder)."
    if gate.paired:
        failed = (
            f"; {len(gate.failures)} of {gate.checks} other checks failed: {gate.failures[0]}" if gate.failures else ""
        )
        return f"Gate: {gate.paired}{failed}."
    if not gate.failures:
        return f"Gate: passed, {gate.checks} checks against baseline {gate.baseline}."
    more = f" (+{len(gate.failures) - 1} more)" if len(gate.failures) > 1 else ""
    return (
        f"Gate: FAILED, {len(gate.failures)} of {gate.checks} checks below bound against baseline "
        f"{gate.baseline}: {gate.failures[0]}{more}."
    )


def flag_name(flag: str) -> str:
    """A flag's headline: the words before its first ':' or ' (' ("LOOPING OUTPUTS", "NOT LOSSLESS")."""
    return re.split(r":| \(", flag, maxsplit=1)[0].strip()


def _named(cells: list[str]) -> str:
    more = f" +{len(cells) - FLAG_CELLS_SHOWN} more" if len(cells) > FLAG_CELLS_SHOWN else ""
    return ", ".join(cells[:FLAG_CELLS_SHOWN]) + more


def distrust(run: Run) -> list[str]:
    """What to distrust, one line each: a killed run, failed cells, and each flag with the cells it hit."""
    out = []
    if run.missing:
        planned = len(run.manifest.planned_cells)
        out.append(f"incomplete run ({run.status}): {planned - len(run.missing)} of {planned} planned cells finished")
    failed = sorted({str(r.cell_id) for r in run.rows if not r.ok})
    if failed:
        out.append(f"failed requests in {len(failed)} cell{'s' * (len(failed) > 1)}: {_named(failed)}")
    by_flag: dict[str, list[str]] = {}
    for r in run.rows:
        for f in r.flags or []:
            cells = by_flag.setdefault(flag_name(f), [])
            if str(r.cell_id) not in cells:
                cells.append(str(r.cell_id))
    spec = len(plots.spec_rows(run.rows))
    out += [f"{name}: {len(cells)} of {spec} cells ({_named(cells)})" for name, cells in by_flag.items()]
    return out


def verdict(run: Run, gate: GateSummary | None) -> Section:
    rows = verdict_rows(run.rows)
    if not rows:
        return Section(
            "Verdict", [Paragraph("No finished speculative cell: nothing measured yet."), Paragraph(gate_line(gate))]
        )
    body: list[Block] = [Table(VERDICT_HEADERS, rows)]
    deploy = answer.answer_rows(run.rows)
    if deploy:
        body += [Paragraph("Which arm to deploy, per suite and load:"), Table(answer.HEADERS, deploy)]
        missing = answer.not_weighed(run.manifest.hardware.device)
        if missing:
            body += [Paragraph("Not weighed on this device:"), Bullets(missing)]
        raced = answer.race_notes(run.rows)
        if raced:
            body += [Paragraph("Raced (an arm stops being measured once its rank is settled):"), Bullets(raced)]
    body.append(Paragraph(gate_line(gate)))
    worries = distrust(run)
    if worries:
        body += [Paragraph("What to distrust (details below):"), Bullets(worries)]
    else:
        body.append(Paragraph("What to distrust: nothing flagged on any cell."))
    return Section("Verdict", body)


def _completeness(run: Run) -> list[Block]:
    out: list[Block] = []
    planned = run.manifest.planned_cells
    if run.missing:
        out += [
            Paragraph(
                f"Incomplete run (status {run.status}): {len(planned) - len(run.missing)} of {len(planned)} "
                f"planned cells finished. Every number and plot below covers the finished cells only. "
                f"Missing cells:"
            ),
            Bullets(run.missing),
        ]
    failed = sorted({r.cell_id for r in run.rows if not r.ok})  # rows have ids
    if failed:
        out += [
            Paragraph("Cells with failed requests (their numbers cover the requests that finished):"),
            Bullets([f"{c}: {next(r.error for r in run.rows if r.cell_id == c)}" for c in failed]),
        ]
    flags = [f"{r.cell_id}: {f}" for r in run.rows for f in (r.flags or [])]
    if flags:
        out += [Paragraph("Flags raised while measuring:"), Bullets(flags)]
    return out


def _measured(run: Run, spec: list[CellRow]) -> list[Block]:
    """The summary by suite at the reference setting, then every measured cell by suite."""
    base = {r.cell_id: r for r in run.rows if r.mode == BASELINE}
    t, c = plots.reference(run.rows)
    summary = Table(
        ["suite", "draft", "k", "AL", "AL 95% CI", "draft acceptance rate", "speedup (×)"],
        [
            [
                str(r.suite),
                str(r.draft),
                str(r.k),
                fmt(r.acceptance_length),
                _ci(r),
                fmt(r.draft_acceptance_rate),
                fmt(r.speedup),
            ]
            for r in plots.reference_cells(run.rows).values()
        ],
    )
    cells: list[Block] = []
    for label, rs in plots.series(spec).items():
        rs = sorted(rs, key=lambda r: (r.k, r.concurrency, r.temperature))
        cells.append(Section(label, [Table(CELL_HEADERS, [_cell_row(r, base.get(r.cell_id)) for r in rs])], level=3))
    return [
        Section(f"Summary by suite (largest k, T={t:g}, concurrency {c})", [summary]),
        Section("Every measured cell, by suite", cells),
    ]


def build_document(
    run: Run,
    images: list[tuple[str, str]],
    published: list | None = None,
    gate: GateSummary | None = None,
    rate_lines: list[slo_view.RateLine] | None = None,
    headroom: dict | None = None,
    training: TrainingHealth | None = None,
) -> Document:
    """The report, built once. `images`: (PNG file name, title) of the plots beside it; `published`:
    figures to show beside matching cells (results/published.py); `gate`: the gate's verdict from the
    run folder (read_gate); `rate_lines`: the open-loop lines, when the caller has them already;
    `headroom`: the run's headroom.json when `harness headroom` ran into its folder (its plot beside);
    `training`: the main job's training-health verdict (read_training_health)."""
    spec = plots.spec_rows(run.rows)
    body: list[Block] = [verdict(run, gate), *sections.training(training)]
    done = _completeness(run)
    if done:
        body.append(Section("What to distrust, in detail", done))
    body.append(Section("Run", [Bullets(_run_facts(run))]))
    if spec:
        body += _measured(run, spec) + sections.explained(run) + sections.every_k(spec) + sections.load(run)
    body += sections.rates(run, slo_view.rate_lines(run) if rate_lines is None else rate_lines)
    body += sections.caching(cache_view.cache_pairs(run))
    pairs = pub.matches(run.rows, run.manifest, published or [])
    if pairs:
        body.append(
            Section(
                "Published figures for comparison",
                [Bullets(pub.notes(run.manifest)), Table(pub.HEADERS, pub.table_rows(pairs))],
            )
        )
    if headroom is not None:
        from harness.results import headroom_view

        body.append(Section("Headroom", headroom_view.blocks(headroom, headroom_view.HEADROOM_PNG)))
    if images:
        body.append(Section("Plots", [Image(name, title) for name, title in images]))
    body.append(Section("Definitions (harness/metrics.py)", [Bullets(DEFINITIONS)]))
    return Document(f"Benchmark report: {run.label}", body)


def _paired_line(data: dict) -> str | None:
    """The three-way verdict line: a paired gate's, or a stored-number gate's that could not settle."""
    kind, v = data.get("baseline_kind"), data.get("verdict")
    if kind != "paired" and v != "inconclusive":
        return None
    mdd = data.get("detectable_drop")
    sees = f", the test sees a drop of {mdd:.1%} at 80 % power" if isinstance(mdd, float) else ""
    what = "paired against the baseline's draft" if kind == "paired" else "stored-number baseline"
    return f"{v} ({what}; tolerance {data.get('tolerance', 0):.1%}{sees})"


def read_gate(run_dir: Path) -> GateSummary | None:
    """The gate's verdict from <run>/gate/gate.json (harness/results/gate.py verdict_dict), or None
    without one (or when it cannot be read: the verdict then says "not gated")."""
    try:
        data = json.loads((run_dir / GATE_VERDICT).read_text())
        return GateSummary(
            str(data["baseline"]), int(data["checks"]), tuple(map(str, data["failures"])), _paired_line(data)
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_training_health(run_dir: Path) -> TrainingHealth | None:
    """The training-health verdict of a main-job run (<run>/train/train_report.json), or None (a bench
    of a draft trained elsewhere, or a report from before the verdict)."""
    try:
        found = json.loads((run_dir / TRAIN_REPORT).read_text()).get("health")
        return TrainingHealth.from_dict(found) if found else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _headroom(run_dir: Path, folder: Path) -> dict | None:
    """The run's headroom.json (harness/headroom.py) with its plot drawn into the report folder, or None."""
    from harness.analysis.headroom import CostFit
    from harness.results import headroom_view

    path = run_dir / headroom_view.HEADROOM_JSON
    if not path.exists():
        return None
    found = json.loads(path.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    plots.plot_headroom(CostFit.from_dict(found["fit"]), found, folder / headroom_view.HEADROOM_PNG)
    return found


def write_report(run: str | Path, out_dir: str | Path | None = None) -> ReportFiles:
    """`harness report`: the run read once, then `write_run_report`."""
    return write_run_report(read_run(run), out_dir)


def write_run_report(r: Run, out_dir: str | Path | None = None) -> ReportFiles:
    """report.md, report.html and four PNGs of a run already read into out_dir (default: <run>/report/)."""
    from harness.provenance import atomic_write_text

    folder = Path(out_dir) if out_dir is not None else r.path / "report"
    planned = len(r.manifest.planned_cells)
    note = (
        f"incomplete run ({r.status}): {planned - len(r.missing)} of {planned} planned cells finished"
        if r.missing
        else None
    )
    made = plots.write_plots(r.rows, folder, note)
    lines = slo_view.rate_lines(r)
    bounds = slo.bounds_s(r.manifest.slo or {})
    for i, line in enumerate(lines[:MAX_RATE_PLOTS]):
        png = folder / f"rate_sweep_{i + 1}.png"
        made.append((png, plots.plot_rate_sweep(line, bounds, png, note)))
    headroom = _headroom(r.path, folder)
    doc = build_document(
        r,
        [(p.name, title) for p, title in made],
        pub.load_published(),
        read_gate(r.path),
        rate_lines=lines,
        headroom=headroom,
        training=read_training_health(r.path),
    )
    atomic_write_text(folder / "report.md", to_markdown(doc))
    atomic_write_text(folder / "report.html", to_html(doc, folder))
    return ReportFiles(folder / "report.md", folder / "report.html", tuple(p for p, _ in made))
