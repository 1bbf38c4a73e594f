"""`harness report`: one run as report.md + a self-contained report.html (plots embedded as
base64 PNG data URIs) + the PNGs themselves. Built as a list of blocks rendered twice, so the
two files always say the same thing. Every number's definition is stated (harness/metrics.py).

Order: the answer first. A verdict (per suite and draft: faster or not, speedup and AL with their
CIs; the gate's result when the run folder holds one; what to distrust), then the flags in detail
and the run's facts, then the tables and plots the data supports (harness/results/load_view.py),
and the definitions last.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.analysis import slo
from harness.results import answer, cache_view, k_view, load_view, plots, slo_view
from harness.results import published as pub
from harness.results.runs import Run, fmt, read_run
from harness.schema import BASELINE, CellRow

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


# ----------------------------------------------------------------------------- content (pure)


def _ci(r: CellRow) -> str:
    lo, hi = r.al_ci_low, r.al_ci_high
    return "—" if lo is None or hi is None else f"{lo:.3f} – {hi:.3f}"


def _rates(r: CellRow) -> str:
    return " / ".join(f"{x:.2f}" for x in r.per_position_rates or []) or "—"


def _cell_row(r: CellRow, base: CellRow | None) -> list[str]:
    lm = r.lossless_match_rate
    n, m = r.lossless_compared, r.lossless_matches
    lm_s = "—" if lm is None else f"{lm:.1%} ({int(m)}/{int(n)})" if n is not None and m is not None else f"{lm:.1%}"
    return [
        str(r.k),
        str(r.concurrency),
        f"{r.temperature:g}",
        fmt(r.acceptance_length),
        _ci(r),
        fmt(r.tokens_per_step),
        fmt(r.draft_acceptance_rate),
        _rates(r),
        fmt(r.speedup) + _speedup_ci(r),
        fmt(r.output_tok_per_s, 1),
        fmt(base.output_tok_per_s if base else None, 1),
        fmt(r.ttft_ms_median, 1),
        lm_s,
        _pct(r.repetition_share),
    ]


def _speedup_ci(r: CellRow) -> str:
    lo, hi = r.speedup_ci_low, r.speedup_ci_high
    return "" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]"


def _run_facts(run: Run) -> list[str]:
    m = run.manifest
    hw, pk = m.hardware, m.packages
    facts = [
        f"status: {run.status}; started {m.started_at}, ended {m.ended_at or 'not recorded'}",
        f"harness git sha: {m.git_sha}",
        f"hardware: {hw.describe()}",
        "packages: " + (", ".join(f"{k} {v}" for k, v in pk.items()) or "—"),
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
        return "—"
    return f"{sp:.2f}x" + ("" if lo is None or hi is None else f" [{lo:.2f}, {hi:.2f}]")


def _al_ci(r: CellRow) -> str:
    al, lo, hi = r.acceptance_length, r.al_ci_low, r.al_ci_high
    return fmt(al, 2) + ("" if lo is None or hi is None else f" [{lo:.2f}, {hi:.2f}]")


def _spread(rs: list[CellRow]) -> str:
    sps = [r.speedup for r in rs if r.speedup is not None]
    if not sps:
        return "—"
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


def verdict_blocks(run: Run, gate: GateSummary | None) -> list[tuple]:
    rows = verdict_rows(run.rows)
    if not rows:
        return [
            ("h", 2, "Verdict"),
            ("p", "No finished speculative cell: nothing measured yet."),
            ("p", gate_line(gate)),
        ]
    worries = distrust(run)
    deploy = answer.answer_rows(run.rows)
    return [
        ("h", 2, "Verdict"),
        ("table", VERDICT_HEADERS, rows),
        *(
            [("p", "Which arm to deploy, per suite and load:"), ("table", list(answer.HEADERS), deploy)]
            + (
                [("p", "Not weighed on this device:"), ("list", missing)]
                if (missing := answer.not_weighed(run.manifest.hardware.device))
                else []
            )
            if deploy
            else []
        ),
        ("p", gate_line(gate)),
        *(
            [("p", "What to distrust (details below):"), ("list", worries)]
            if worries
            else [("p", "What to distrust: nothing flagged on any cell.")]
        ),
    ]


def _completeness(run: Run) -> list[tuple]:
    out: list[tuple] = []
    planned = run.manifest.planned_cells
    if run.missing:
        out += [
            (
                "p",
                f"Incomplete run (status {run.status}): {len(planned) - len(run.missing)} of {len(planned)} "
                f"planned cells finished. Every number and plot below covers the finished cells only. "
                f"Missing cells:",
            ),
            ("list", run.missing),
        ]
    failed = sorted({r.cell_id for r in run.rows if not r.ok})  # rows have ids
    if failed:
        out += [
            ("p", "Cells with failed requests (their numbers cover the requests that finished):"),
            ("list", [f"{c}: {next(r.error for r in run.rows if r.cell_id == c)}" for c in failed]),
        ]
    flags = [f"{r.cell_id}: {f}" for r in run.rows for f in (r.flags or [])]
    if flags:
        out += [("p", "Flags raised while measuring:"), ("list", flags)]
    return out


def _load_blocks(run: Run) -> list[tuple]:
    """Crossover per (draft, suite, k, T) and the best-k schedule with its recipe snippet; from one
    load point, one sentence saying so instead (load_view: what the data supports)."""
    lines = load_view.crossovers(run.rows)
    note = load_view.load_note(run.rows)
    if note:
        return [("p", f"Load: {note}.")] + _dynamic_blocks(run)
    if not lines:
        return []
    out: list[tuple] = [
        ("h", 2, "When speculation pays: crossover and best k per load"),
        (
            "table",
            ["draft", "suite", "k", "T", "concurrencies", "crossover [95% CI]"],
            [
                [x.draft, x.suite, str(x.k), f"{x.temperature:g}", ",".join(map(str, x.concurrencies)), x.text()]
                for x in lines
            ],
        ),
    ]
    for sch in load_view.schedules(run.rows, f"run {run.label}"):
        out += [
            (
                "p",
                f"Best k per concurrency, {sch.draft} on {sch.suite} (T={sch.temperature:g}): "
                + ", ".join(f"c={c}: k={k}" for c, k in sch.best.items())
                + f"; num_speculative_tokens_per_batch_size = {[list(r) for r in sch.ranges]}",
            ),
            ("code", sch.snippet),
        ]
    return out + _dynamic_blocks(run)


MAX_RATE_PLOTS = 6  # one figure per open-loop line, the first few
RATE_HEADERS = [
    "offered /s",
    "arm",
    "arrived /s",
    "achieved /s",
    "goodput /s",
    "TTFT p50/p90/p99 ms",
    "TPOT p50/p90/p99 ms",
    "ITL per token p99 ms",
    "e2e p50/p90/p99 ms",
    "AL",
]


def _three(a, b, c) -> str:
    return "/".join(fmt(v, 1) for v in (a, b, c))


def _rate_row(rate: float, arm: str, r: CellRow) -> list[str]:
    return [
        f"{rate:g}",
        arm,
        fmt(r.arrival_rate),
        fmt(r.achieved_rate),
        fmt(r.goodput),
        _three(r.ttft_ms_median, r.ttft_ms_p90, r.ttft_ms_p99),
        _three(r.tpot_ms_median, r.tpot_ms_p90, r.tpot_ms_p99),
        fmt(r.itl_per_token_ms_p99, 1),
        _three(r.e2e_ms_median, r.e2e_ms_p90, r.e2e_ms_p99),
        fmt(r.acceptance_length if r.is_speculative else None),
    ]


def rate_blocks(run: Run, lines: list[slo_view.RateLine]) -> list[tuple]:
    """The open-loop cells: per line a table per rate and arm, the saturation points and, with
    bench.slo, each arm's SLO rate and their ratio (definitions: harness/analysis/slo.py)."""
    if not lines:
        return []
    bounds = slo.bounds_s(run.manifest.slo or {})
    out: list[tuple] = [
        ("h", 2, "Open-loop load: latency, goodput and the rate each arm serves within its SLO"),
        (
            "p",
            "Requests arrive open-loop at the offered rate (bench.request_rate, vLLM's Poisson/gamma arrivals, the "
            "same seeded schedule for both arms); concurrency caps the requests in flight. "
            + (f"SLO: {slo_view.slo_text(bounds)}." if bounds else "No SLO stated (bench.slo): no goodput."),
        ),
    ]
    for x in lines:
        rows = [
            _rate_row(rate, arm, r)
            for rate, b, s in zip(x.rates, x.baseline, x.speculative)
            for arm, r in (("baseline", b), ("speculative", s))
        ]
        facts = [
            f"saturation (first offered rate whose requests took over {1 / (1 - slo.SATURATION_TOLERANCE):.2f}x the "
            f"time arrivals allow at the lowest rate's latency): baseline "
            f"{_sat(x.saturation_baseline)}, speculative {_sat(x.saturation_speculative)}"
        ]
        if x.slo is not None:
            top = max(x.rates)
            facts += [
                f"highest rate within the SLO at p99 [95% CI]: baseline {slo_view.rate_text(x.slo.baseline, top)}, "
                f"speculative {slo_view.rate_text(x.slo.speculative, top)}",
                f"SLO rate ratio (speculative ÷ baseline: how much more traffic the same hardware carries within "
                f"the SLO): {slo_view.ratio_text(x.slo)}",
            ]
        out += [("h", 3, x.key), ("table", RATE_HEADERS, rows), ("list", facts)]
    return out


def cache_blocks(pairs: list[cache_view.CachePair]) -> list[tuple]:
    """Prefix caching on vs off (bench.prefix_caching), per pair a table by turn and the verdict."""
    if not pairs:
        return []
    out: list[tuple] = [
        ("h", 2, "Prefix caching: acceptance per turn with and without the cache"),
        (
            "p",
            "Each suite ran twice on the same engine: with vLLM's prefix cache (a conversation's later turn "
            "reuses the blocks of its earlier turns, a repeated prompt its earlier run's) and as <suite>@nocache, "
            "every request with a fresh cache_salt (nothing reused). AL on the speculative arm; the difference's "
            "CI resamples conversations, the same draw for both cells; hit rate: prompt tokens found cached / "
            "looked up (vllm:prefix_cache_hits / queries). With an EAGLE/MTP draft vLLM recomputes the last "
            "cached block of every hit (its draft needs those tokens' hidden states), so the speculative arm's hit "
            "rate runs one block per request below its baseline's on the same prompts.",
        ),
    ]
    for p in pairs:
        verdict = p.flag or "no turn's AL differs beyond its CI: caching does not change acceptance here"
        out += [("h", 3, p.key), ("table", cache_view.HEADERS, cache_view.table_rows(p)), ("list", [verdict])]
    return out


def _sat(v: float | None) -> str:
    return "none on the grid" if v is None else f"{v:g}/s"


def _dynamic_blocks(run: Run) -> list[tuple]:
    rows = []
    for draft, suite, t, verdicts in load_view.dynamic_verdicts(run.rows):
        rows += [
            [
                draft,
                suite,
                f"{t:g}",
                str(v.concurrency),
                "yes" if v.holds else "no",
                ", ".join(f"k={k}" for k in v.beaten_by) or "—",
            ]
            for v in verdicts
        ]
    if not rows:
        return []
    return [
        (
            "p",
            "The dynamic arm (the derived schedule benched as its own engine, draft '<draft>-dynamic') against "
            "every fixed k: it holds at a concurrency when no fixed k's speedup CI lies wholly above its own.",
        ),
        ("table", ["draft", "suite", "T", "concurrency", "matches or beats every fixed k", "beaten by"], rows),
    ]


def _k_blocks(spec: list[CellRow]) -> list[tuple]:
    """Speedup at every k from the measured ks (bench.k_measured; harness/results/k_view.py)."""
    rows = k_view.table_rows(k_view.k_groups(spec))
    if not rows:
        return []
    return [
        ("h", 2, "Speedup at every k (measured ks and the step-cost line between them)"),
        (
            "p",
            "Measured ks have an engine of their own; the others (marked ~) are estimated: tokens per step from the "
            "largest k's per-step records, step cost from the line through the measured ks (speedup = tokens per "
            "step / (a + s k), harness/analysis/k_speedup.py), the interval the line's range over the measured "
            "CIs' ends. Where ks are not told apart from the best, another k's engine would settle it.",
        ),
        ("table", k_view.HEADERS, rows),
    ]


def _pct(v) -> str:
    return "—" if v is None else f"{v:.0%}"


def _bucket_text(r: CellRow, what: str) -> str:
    return (
        "; ".join(
            f"{n}: {v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")
            for n, v, lo, hi, _ in r.breakdown(what)
        )
        or "—"
    )


def _explained_blocks(run: Run) -> list[tuple]:
    cells = plots.reference_cells(run.rows)
    if not cells:
        return []
    rows = [
        [
            label,
            str(r.k),
            _bucket_text(r, "output_position"),
            _bucket_text(r, "prompt_length"),
            _bucket_text(r, "segment"),
            _bucket_text(r, "turn"),
            "; ".join(f"turn {i + 1}: {fmt(v)}" for i, v in enumerate(r.speedup_by_turn or [])) or "—",
            _pct(r.repetition_share),
            _bucket_text(r, "k"),
        ]
        for label, r in cells.items()
    ]
    if all(v == "—" for row in rows for v in row[2:]):
        return []  # no cell carries a breakdown: a table of dashes says nothing
    header = [
        "suite",
        "k",
        "AL by output position",
        "AL by prompt length (tokens)",
        "AL thinking / answer",
        "AL by turn",
        "speedup by turn",
        "verifier repetition",
        "AL by k from this engine (k' < k estimated)",
    ]
    # a breakdown no cell carries (no multi-turn suite, bench.k_from_one_engine off) is left out
    keep = [i for i in range(len(header)) if i < 2 or any(row[i] != "—" for row in rows)]
    header, rows = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
    return [("h", 2, "Acceptance explained (reference cells)"), ("table", header, rows)]


def build_blocks(
    run: Run,
    images: list[tuple[str, str]],
    published: list | None = None,
    gate: GateSummary | None = None,
    rate_lines: list[slo_view.RateLine] | None = None,
) -> list[tuple]:
    """The report as blocks: ("h", level, text) ("p", text) ("list", items) ("table", headers, rows)
    ("code", text) ("img", file name, title). `published`: figures to show beside matching cells
    (results/published.py); `gate`: the gate's verdict from the run folder (read_gate)."""
    spec = plots.spec_rows(run.rows)
    base = {r.cell_id: r for r in run.rows if r.mode == BASELINE}
    t, c = plots.reference(run.rows)
    blocks: list[tuple] = [("h", 1, f"Benchmark report: {run.label}"), *verdict_blocks(run, gate)]
    done = _completeness(run)
    if done:
        blocks += [("h", 2, "What to distrust, in detail"), *done]
    blocks += [("h", 2, "Run"), ("list", _run_facts(run))]
    if spec:
        ref = plots.reference_cells(run.rows)
        blocks += [
            ("h", 2, f"Summary by suite (largest k, T={t:g}, concurrency {c})"),
            (
                "table",
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
                    for r in ref.values()
                ],
            ),
        ]
        blocks.append(("h", 2, "Every measured cell, by suite"))
        for label, rs in plots.series(spec).items():
            rs = sorted(rs, key=lambda r: (r.k, r.concurrency, r.temperature))
            blocks += [("h", 3, label), ("table", CELL_HEADERS, [_cell_row(r, base.get(r.cell_id)) for r in rs])]
        blocks += _explained_blocks(run) + _k_blocks(spec) + _load_blocks(run)
    blocks += rate_blocks(run, slo_view.rate_lines(run) if rate_lines is None else rate_lines)
    blocks += cache_blocks(cache_view.cache_pairs(run))
    pairs = pub.matches(run.rows, run.manifest, published or [])
    if pairs:
        blocks += [
            ("h", 2, "Published figures for comparison"),
            ("list", pub.notes(run.manifest)),
            ("table", pub.HEADERS, pub.table_rows(pairs)),
        ]
    if images:
        blocks.append(("h", 2, "Plots"))
        blocks += [("img", name, title) for name, title in images]
    return blocks + [("h", 2, "Definitions (harness/metrics.py)"), ("list", DEFINITIONS)]


# ----------------------------------------------------------------------------- renderers


def to_markdown(blocks: list[tuple]) -> str:
    out: list[str] = []
    for b in blocks:
        if b[0] == "h":
            out += ["#" * b[1] + " " + b[2], ""]
        elif b[0] == "p":
            out += [b[1], ""]
        elif b[0] == "list":
            out += [f"- {x}" for x in b[1]] + [""]
        elif b[0] == "table":
            out += ["| " + " | ".join(b[1]) + " |", "|" + "---|" * len(b[1])]
            out += ["| " + " | ".join(row) + " |" for row in b[2]] + [""]
        elif b[0] == "code":
            out += ["```toml", b[1].rstrip("\n"), "```", ""]
        elif b[0] == "img":
            title = b[2].replace("\n", " — ")
            out += [f"![{title}]({b[1]})", "", f"*{title}*", ""]
    return "\n".join(out)


CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}td,th{border:1px solid #ccc;"
    "padding:.3em .6em;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    "img{max-width:100%;border:1px solid #ddd}figure{margin:1.5em 0}figcaption{font-size:.9em;color:#555}"
)


def to_html(blocks: list[tuple], folder: Path) -> str:
    e = html.escape
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{e(blocks[0][2])}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    for b in blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            out.append(f"<p>{e(b[1])}</p>")
        elif b[0] == "list":
            out.append("<ul>" + "".join(f"<li>{e(str(x))}</li>" for x in b[1]) + "</ul>")
        elif b[0] == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b[1])
            body = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in b[2])
            out.append(f"<table><tr>{head}</tr>{body}</table>")
        elif b[0] == "code":
            out.append(f"<pre>{e(b[1])}</pre>")
        elif b[0] == "img":
            data = base64.b64encode((folder / b[1]).read_bytes()).decode()
            out.append(
                f"<figure><img alt='{e(b[2])}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(b[2])}</figcaption></figure>"
            )
    return "\n".join(out + ["</body></html>"]) + "\n"


def read_gate(run_dir: Path) -> GateSummary | None:
    """The gate's verdict from <run>/gate/gate.json (harness/results/gate.py verdict_dict), or None
    without one (or when it cannot be read: the verdict then says "not gated")."""
    try:
        data = json.loads((run_dir / GATE_VERDICT).read_text())
        return GateSummary(str(data["baseline"]), int(data["checks"]), tuple(map(str, data["failures"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_report(run: str | Path, out_dir: str | Path | None = None) -> ReportFiles:
    """report.md, report.html and four PNGs into out_dir (default: <run>/report/)."""
    from harness.provenance import atomic_write_text

    r = read_run(run)
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
    blocks = build_blocks(
        r, [(p.name, title) for p, title in made], pub.load_published(), read_gate(r.path), rate_lines=lines
    )
    atomic_write_text(folder / "report.md", to_markdown(blocks))
    atomic_write_text(folder / "report.html", to_html(blocks, folder))
    return ReportFiles(folder / "report.md", folder / "report.html", tuple(p for p, _ in made))
