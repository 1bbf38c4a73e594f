"""The report's sections past the summary, each shown only where the data supports it: acceptance
explained (breakdowns of the reference cells), speedup at every k, crossover and best k per load
(with the dynamic arm's verdict), the open-loop rate sweep and prefix caching on vs off. Pure: typed
blocks of harness/results/report_document.py from typed rows."""

from __future__ import annotations

from harness.analysis import slo
from harness.analysis import training_health as th
from harness.analysis.training_health import TrainingHealth
from harness.results import cache_view, k_view, load_view, plots, slo_view
from harness.results.report_document import Block, Bullets, Code, Paragraph, Section, Table
from harness.results.runs import Run
from harness.schema import BreakdownName, CellRow
from harness.ui import MISSING, fmt, fmt_ci

# ----------------------------------------------------------------------------- acceptance explained


def _bucket_text(r: CellRow, what: BreakdownName) -> str:
    return (
        "; ".join(f"{n}: {v:.2f}" + fmt_ci(lo, hi) for n, v, lo, hi, _ in r.breakdowns.of(what).measured()) or MISSING
    )


EXPLAINED_COLUMNS = [
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


def explained(run: Run) -> list[Block]:
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
            "; ".join(f"turn {i + 1}: {fmt(v)}" for i, v in enumerate(r.speedup_by_turn or [])) or MISSING,
            fmt(r.repetition_share, "{:.0%}"),
            _bucket_text(r, "k"),
        ]
        for label, r in cells.items()
    ]
    if all(v == MISSING for row in rows for v in row[2:]):
        return []  # no cell carries a breakdown: a table of dashes says nothing
    # a breakdown no cell carries (no multi-turn suite, bench.k_from_one_engine off) is left out
    keep = [i for i in range(len(EXPLAINED_COLUMNS)) if i < 2 or any(row[i] != MISSING for row in rows)]
    table = Table([EXPLAINED_COLUMNS[i] for i in keep], [[row[i] for i in keep] for row in rows])
    return [Section("Acceptance explained (reference cells)", [table])]


def every_k(spec: list[CellRow]) -> list[Block]:
    """Speedup at every k from the measured ks (bench.k_measured; harness/results/k_view.py)."""
    rows = k_view.table_rows(k_view.k_groups(spec))
    if not rows:
        return []
    text = (
        "Measured ks have an engine of their own; the others (marked ~) are estimated: tokens per step from the "
        "largest k's per-step records, step cost from the line through the measured ks (speedup = tokens per "
        "step / (a + s k), harness/analysis/k_speedup.py), the interval the line's range over the measured "
        "CIs' ends. Where ks are not told apart from the best, another k's engine would settle it."
    )
    return [
        Section(
            "Speedup at every k (measured ks and the step-cost line between them)",
            [Paragraph(text), Table(k_view.HEADERS, rows)],
        )
    ]


# ----------------------------------------------------------------------------- load: crossover, best k, dynamic arm


def load(run: Run) -> list[Block]:
    """Crossover per (draft, suite, k, T) and the best-k schedule with its recipe snippet; from one
    load point, one sentence saying so instead (load_view: what the data supports)."""
    lines = load_view.crossovers(run.rows)
    note = load_view.load_note(run.rows)
    if note:
        return [Paragraph(f"Load: {note}."), *_dynamic(run)]
    if not lines:
        return []
    body: list[Block] = [
        Table(
            ["draft", "suite", "k", "T", "concurrencies", "crossover [95% CI]"],
            [
                [x.draft, x.suite, str(x.k), f"{x.temperature:g}", ",".join(map(str, x.concurrencies)), x.text()]
                for x in lines
            ],
        )
    ]
    for sch in load_view.schedules(run.rows, f"run {run.label}"):
        body += [
            Paragraph(
                f"Best k per concurrency, {sch.draft} on {sch.suite} (T={sch.temperature:g}): "
                + ", ".join(f"c={c}: k={k}" for c, k in sch.best.items())
                + f"; num_speculative_tokens_per_batch_size = {[list(r) for r in sch.ranges]}"
            ),
            Code(sch.snippet),
        ]
    return [Section("When speculation pays: crossover and best k per load", body + _dynamic(run))]


def _dynamic(run: Run) -> list[Block]:
    rows = []
    for draft, suite, t, verdicts in load_view.dynamic_verdicts(run.rows):
        rows += [
            [
                draft,
                suite,
                f"{t:g}",
                str(v.concurrency),
                "yes" if v.holds else "no",
                ", ".join(f"k={k}" for k in v.beaten_by) or MISSING,
            ]
            for v in verdicts
        ]
    if not rows:
        return []
    return [
        Paragraph(
            "The dynamic arm (the derived schedule benched as its own engine, draft '<draft>-dynamic') against "
            "every fixed k: it holds at a concurrency when no fixed k's speedup CI lies wholly above its own."
        ),
        Table(["draft", "suite", "T", "concurrency", "matches or beats every fixed k", "beaten by"], rows),
    ]


# ----------------------------------------------------------------------------- open-loop load

RATE_COLUMNS = [
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


def _three(a: float | None, b: float | None, c: float | None) -> str:
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


def _sat(v: float | None) -> str:
    return "none on the grid" if v is None else f"{v:g}/s"


def _rate_facts(x: slo_view.RateLine) -> list[str]:
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
    return facts


def rates(run: Run, lines: list[slo_view.RateLine]) -> list[Block]:
    """The open-loop cells: per line a table per rate and arm, the saturation points and, with
    bench.slo, each arm's SLO rate and their ratio (definitions: harness/analysis/slo.py)."""
    if not lines:
        return []
    bounds = slo.bounds_s(run.manifest.slo or {})
    intro = Paragraph(
        "Requests arrive open-loop at the offered rate (bench.request_rate, vLLM's Poisson/gamma arrivals, the "
        "same seeded schedule for both arms); concurrency caps the requests in flight. "
        + (f"SLO: {slo_view.slo_text(bounds)}." if bounds else "No SLO stated (bench.slo): no goodput.")
    )
    per_line: list[Block] = [
        Section(
            x.key,
            [
                Table(
                    RATE_COLUMNS,
                    [
                        _rate_row(rate, arm, r)
                        for rate, b, s in zip(x.rates, x.baseline, x.speculative)
                        for arm, r in (("baseline", b), ("speculative", s))
                    ],
                ),
                Bullets(_rate_facts(x)),
            ],
            level=3,
        )
        for x in lines
    ]
    return [Section("Open-loop load: latency, goodput and the rate each arm serves within its SLO", [intro, *per_line])]


# ----------------------------------------------------------------------------- prefix caching


def caching(pairs: list[cache_view.CachePair]) -> list[Block]:
    """Prefix caching on vs off (bench.prefix_caching), per pair a table by turn and the verdict."""
    if not pairs:
        return []
    intro = Paragraph(
        "Each suite ran twice on the same engine: with vLLM's prefix cache (a conversation's later turn "
        "reuses the blocks of its earlier turns, a repeated prompt its earlier run's) and as <suite>@nocache, "
        "every request with a fresh cache_salt (nothing reused). AL on the speculative arm; the difference's "
        "CI resamples conversations, the same draw for both cells; hit rate: prompt tokens found cached / "
        "looked up (vllm:prefix_cache_hits / queries). With an EAGLE/MTP draft vLLM recomputes the last "
        "cached block of every hit (its draft needs those tokens' hidden states), so the speculative arm's hit "
        "rate runs one block per request below its baseline's on the same prompts."
    )
    per_pair: list[Block] = [
        Section(
            p.key,
            [
                Table(cache_view.HEADERS, cache_view.table_rows(p)),
                Bullets([p.flag or "no turn's AL differs beyond its CI: caching does not change acceptance here"]),
            ],
            level=3,
        )
        for p in pairs
    ]
    return [Section("Prefix caching: acceptance per turn with and without the cache", [intro, *per_pair])]


# ----------------------------------------------------------------------------- training health


def training(health: TrainingHealth | None) -> list[Block]:
    """The training-health verdict the main job judged before its bench (harness/analysis/training_health.py):
    each reason with its figures and what would help, then the figures it read."""
    if health is None:
        return []
    f = health.figures
    facts = [
        f"training tokens per epoch ÷ trainable draft parameters: {fmt(f.train_tokens_per_epoch, '{:,}')} ÷ "
        f"{fmt(f.trainable_params, '{:,}')} = {fmt(f.tokens_per_param, '{:.4f}')} (floor {th.MIN_TOKENS_PER_PARAM}); "
        f"{fmt(f.num_train_samples, '{}')} training samples",
        "training loss (speculators' sum over the TTT steps), first → last epoch mean: "
        f"{fmt(f.loss_first, '{:.3g}')} → {fmt(f.loss_last, '{:.3g}')} "
        f"(must fall below {th.LOSS_FALL_RATIO}×); held-out loss {fmt(f.held_out_loss, '{:.3g}')} "
        f"(overfit above {th.OVERFIT_LOSS_RATIO}× the last epoch's)",
        f"step-0 accuracy, last epoch's training mean vs held-out: {fmt(f.train_acc0_last, '{:.3f}')} vs "
        f"{fmt(f.held_out_acc0, '{:.3f}')} (overfit below {th.OVERFIT_ACC_RATIO}×)",
        f"predicted AL {fmt(f.predicted_al, '{:.2f}')} (1 + held-out full accuracy per TTT step)"
        + "".join(f"; {arm} expected {tps:.2f} tokens per step" for arm, tps in f.references.items())
        + (
            f" (ngram's AL over its matched steps {f.ngram_acceptance_length:.2f}; replayed over the training "
            "responses, harness/analysis/prompt_lookup.py)"
            if f.ngram_acceptance_length is not None
            else ""
        ),
    ]
    body: list[Block] = [Paragraph(health.line())]
    if health.findings:
        body.append(
            Table(["reason", "figures", "what would help"], [[x.reason, x.detail, x.remedy] for x in health.findings])
        )
    body.append(Bullets(facts))
    return [Section("Training health (judged before the bench)", body)]
