"""`harness headroom`: the speedup this engine allows at each acceptance, fitted from the engine
itself, and where the user's draft sits on it (issue 53; the model: harness/analysis/headroom.py).

The sweep starts the baseline once and, per k, the draft at its own acceptance and at a few
synthetic acceptance profiles (vLLM's `rejection_sample_method = "synthetic"`: the draft runs, so
its cost is real, and each position is accepted at a set rate whatever it proposed). On the CPU
engine vLLM 0.32 lacks the synthetic branch of its rejection kernel; harness/engine/cpu_synthetic.py
supplies it. Every speculative batch is paired with a baseline batch right before it, at the same
concurrency, on the same prompts, T = 0, outputs forced to full length (ignore_eos).

The synthetic rows are a probe of the system's cost, never a result: they live in headroom.json
only (the recipe still refuses 'synthetic'). The fit uses baseline and synthetic points only; the
draft's own cells are what it is checked against.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.headroom import (
    Cell,
    CostFit,
    Placed,
    StepPoint,
    best_k,
    cells,
    conditional_rates,
    fit_cost,
    geometric_rates,
    k_schedule,
    measured_best_k,
    place,
    pooled_rates,
    within_share,
)
from harness.analysis.machine import FOREIGN_CPU_LIMIT, foreign_cpu
from harness.errors import BadInput
from harness.recipe import Recipe
from harness.results.headroom_view import HEADROOM_JSON
from harness.ui import Reporter


@dataclass(frozen=True)
class HeadroomSettings:
    ks: tuple[int, ...] = (1, 2, 3)
    concurrencies: tuple[int, ...] = (1, 4)
    # synthetic profiles: conditional acceptance per position p (unconditional p, p², ..., p^k)
    profiles: tuple[float, ...] = (0.5, 0.9)
    repeats: int = 3
    num_prompts: int = 8
    max_tokens: int = 64
    target_speedup: float = 2.0

    def check(self) -> None:
        if len(set(self.ks)) < 2 or min(self.ks) < 1 or len(set(self.concurrencies)) < 2:
            raise BadInput("harness headroom needs two ks >= 1 and two concurrencies: the cost model has 5 terms")
        if not all(0.0 <= p <= 1.0 for p in self.profiles) or not self.profiles:
            raise BadInput("--profile values are per-position acceptance probabilities in [0, 1]")

    def engines(self) -> int:
        return 1 + len(self.ks) * (1 + len(self.profiles))

    def batches(self) -> int:
        """Measured batches (each speculative one paired with a baseline one)."""
        return 2 * (self.engines() - 1) * len(self.concurrencies) * self.repeats


def sweep_prompts(recipe: Recipe, layout: Any, n: int) -> list[tuple[int, ...]]:
    """The first n prompts of the recipe's suites, rendered as the bench renders them."""
    from harness.bench.planning import recipe_suites, render_requests
    from harness.draft.verifier import load_tokenizer

    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    max_prompt = recipe.engine.max_model_len - recipe.bench.max_tokens
    out: list[tuple[int, ...]] = []
    for suite in recipe_suites(recipe):
        for _, ids in render_requests(tok, suite, max_prompt, recipe.bench.allow_random_prompts):
            if ids and isinstance(ids[0], int):
                out.append(tuple(ids))
    if not out:
        raise BadInput("the recipe's bench.suites have no single-turn prompts to sweep with")
    return out[:n]


def _point(kind: str, k: int, c: int, result: Any, n_requests: int, rates, repeat: int, pair: str) -> StepPoint:
    """A batch as a point: request-steps are the output tokens without speculation, and vLLM's
    drafts plus one prefill step per request with it."""
    counters = result.counters
    steps = result.num_output_tokens if k == 0 else counters.num_drafts + n_requests
    return StepPoint(
        kind=kind,
        k=k,
        concurrency=c,
        wall_s=result.wall_s,
        output_tokens=result.num_output_tokens,
        request_steps=float(steps),
        rates=rates,
        accepted_per_pos=tuple(counters.accepted_per_pos) if k else (),
        repeat=repeat,
        drafts=float(counters.num_drafts) if k else 0.0,
        pair=pair,
    )


def _measure(engines, name: str, kind: str, k: int, rates, requests, settings: HeadroomSettings) -> list[StepPoint]:
    """Every concurrency x repeat on this speculative engine, each batch right after a baseline one."""
    from harness.engine.base import GenRequest, Sampling

    base, spec = engines
    sampling = Sampling(temperature=0.0, ignore_eos=True)
    warm = [GenRequest("warm", requests[0].prompt_token_ids, 8)]
    spec.generate(warm, sampling, 1)
    out = []
    for c in settings.concurrencies:
        for r in range(settings.repeats):
            b = base.generate(requests, sampling, c)
            s = spec.generate(requests, sampling, c)
            out.append(_point("baseline", 0, c, b, len(requests), None, r, name))
            out.append(_point(kind, k, c, s, len(requests), rates, r, name))
    return out


def run_sweep(recipe: Recipe, draft_dir: Path, run_dir: Path, settings: HeadroomSettings, reporter: Reporter):
    """Run the sweep; returns (points, engines' descriptions). Every engine closes, however it ends."""
    from harness.bench.cpu_ticks import read_ticks
    from harness.bench.engines import default_engine_factory
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.engine.base import GenRequest, Sampling
    from harness.engine.settings import SpeculativeSpec, engine_plan, ranks_of, refuse_what_vllm_cannot_run

    settings.check()
    e = recipe.engine
    if e.device == "cpu" and (ranks_of(e) > 1 or e.distributed_executor_backend):
        raise BadInput(
            "harness headroom on CPU needs the single-process engine (one worker, engine.distributed_executor_backend "
            "unset): the synthetic sampling vLLM-CPU lacks is supplied inside the engine's own process"
        )
    if recipe.engine.device == "cpu" and recipe.bench.engine != "offline":
        recipe = recipe.model_copy(update={"bench": recipe.bench.model_copy(update={"engine": "offline"})})
    layout = resolve_verifier(recipe, reporter)
    draft = resolve_drafts(recipe, layout, draft_dir)[0]
    refuse_what_vllm_cannot_run(recipe.engine, draft.verifier, draft.method)
    prompts = sweep_prompts(recipe, layout, settings.num_prompts)
    requests = [GenRequest(f"h{i}", ids, settings.max_tokens) for i, ids in enumerate(prompts)]
    base_plan = engine_plan(recipe.engine, layout)
    make = default_engine_factory(recipe, run_dir)
    points: list[StepPoint] = []
    described: dict[str, Any] = {}
    with make(base_plan, "headroom-baseline") as base:
        base.generate(requests[:2], Sampling(ignore_eos=True), 2)  # warm-up
        described["baseline"] = base.describe()
        for k in settings.ks:
            arms = [("draft", None)] + [("synthetic", geometric_rates(p, k)) for p in settings.profiles]
            for kind, rates in arms:
                spec = SpeculativeSpec(draft.method, k, draft.path, synthetic_acceptance_rates=rates)
                name = f"headroom-k{k}-" + (
                    "draft" if rates is None else "synthetic-" + "-".join(f"{x:.2f}" for x in rates)
                )
                t0 = time.perf_counter()
                with make(engine_plan(recipe.engine, layout, spec), name) as eng:
                    before = read_ticks()
                    points += _measure((base, eng), name, kind, k, rates, requests, settings)
                    after = read_ticks()
                    described[name] = {
                        **eng.describe(),
                        "foreign_cpu": foreign_cpu(before, after) if before and after else None,
                    }
                reporter.log(f"{name}: {time.perf_counter() - t0:.0f} s")
    return points, described


def machine_busy(engines: dict[str, Any]) -> dict[str, Any]:
    """The share of the CPUs other processes used while each engine's batches ran
    (harness/analysis/machine.py), and the engines over FOREIGN_CPU_LIMIT: contention slows a
    speculative batch more than its baseline pair, so their points bend the fit."""
    shares = {n: e.get("foreign_cpu") for n, e in engines.items() if isinstance(e, dict) and "foreign_cpu" in e}
    read = [v for v in shares.values() if v is not None]
    return {
        "foreign_cpu_max": max(read) if read else None,
        "limit": FOREIGN_CPU_LIMIT,
        "busy_engines": sorted(n for n, v in shares.items() if v is not None and v > FOREIGN_CPU_LIMIT),
    }


# ----------------------------------------------------------------------------- what the sweep says


def published_replay(fit: CostFit, concurrencies: Sequence[int]) -> list[dict[str, Any]]:
    """The published Kimi-K2.5 acceptance figures (docs/published_figures.csv) through this engine's
    fit: at the published AL and k, the speedup this system would give at each concurrency."""
    from harness.results.published import load_published

    out = []
    for row in load_published():
        if row.family != "kimi-k2.5":
            continue
        for c in concurrencies:
            est = fit.speedup(row.acceptance_length, row.k, c)
            out.append(
                {
                    "draft": row.draft,
                    "dataset": row.dataset,
                    "k": row.k,
                    "published_al": row.acceptance_length,
                    "setup": row.setup(),
                    "concurrency": c,
                    "speedup_here": est.to_list(),
                    "extrapolated": fit.extrapolated(row.k, c),
                }
            )
    return out


def _k_advice(fit: CostFit, points: Sequence[StepPoint], draft_cells: Sequence[Cell], settings: HeadroomSettings):
    """Per concurrency: the best k the fit predicts from the draft's per-position rates, the measured
    best k, and whether they agree; then the schedule vLLM takes."""
    cond = conditional_rates(pooled_rates(points))
    rows, best = [], {}
    for c in settings.concurrencies:
        choice, options = best_k(fit, cond, settings.ks, c)
        measured = measured_best_k(draft_cells, c)
        best[c] = choice.k
        rows.append(
            {
                "concurrency": c,
                "predicted_best_k": choice.k,
                "predicted_clear": choice.clear,
                "predicted": [{"k": o.k, "al": o.acceptance_length, "speedup": o.speedup.to_list()} for o in options],
                "measured_best_k": measured[0] if measured else None,
                "measured_apart_beyond_noise": measured[1] if measured else None,
            }
        )
    return rows, [list(r) for r in k_schedule(best)]


def analyse(points: Sequence[StepPoint], settings: HeadroomSettings) -> dict[str, Any]:
    """headroom.json's findings from the sweep's points."""
    fit = fit_cost(points)
    all_cells = cells(points)
    draft_cells = [c for c in all_cells if c.kind == "draft"]
    placed: list[Placed] = [
        place(fit, c.k, c.concurrency, c.acceptance_length, c.speedup, c.tokens_per_step) for c in draft_cells
    ]
    synthetic = [
        {
            "k": c.k,
            "concurrency": c.concurrency,
            "rates": list(c.rates or ()),
            "acceptance_length": c.acceptance_length,
            "tokens_per_step": c.tokens_per_step,
            "measured_speedup": c.speedup.to_list(),
            "fitted_speedup": fit.speedup(c.tokens_per_step, c.k, c.concurrency).to_list(),
        }
        for c in all_cells
        if c.kind == "synthetic"
    ]
    k_rows, schedule = _k_advice(fit, points, draft_cells, settings)
    al_for = [
        {
            "k": k,
            "concurrency": c,
            "target_speedup": settings.target_speedup,
            "al": fit.al_for(settings.target_speedup, k, c).to_list(),
        }
        for k in settings.ks
        for c in settings.concurrencies
    ]
    return {
        "fit": fit.to_dict(),
        "draft_cells": [p.to_dict() for p in placed],
        "within_ci_share": within_share(placed),
        # how far the predictions are, whatever the CIs' width: median |allowed / measured - 1|
        "median_abs_error": float(np.median([abs(1 / p.efficiency - 1) for p in placed])) if placed else None,
        "synthetic_cells": synthetic,
        "best_k": k_rows,
        "k_schedule": schedule,
        "al_for_target": al_for,
        "published": published_replay(fit, settings.concurrencies),
    }


def write_headroom(run_dir: Path, settings: HeadroomSettings, points, engines: dict[str, Any], found) -> Path:
    from harness.provenance import atomic_write_json

    path = run_dir / HEADROOM_JSON
    atomic_write_json(
        path,
        {
            "format": 1,
            "note": "synthetic rows probe the engine's cost; they are never results (the recipe refuses 'synthetic')",
            "settings": asdict(settings),
            "points": [p.to_dict() for p in points],
            "engines": engines,
            **found,
        },
    )
    return path


def render(found: dict[str, Any], path: Path, console) -> None:
    """The terminal's view: the report's tables (harness/results/headroom_view.py) as rich tables."""
    from rich.table import Table as RichTable

    from harness.results import headroom_view as view

    def show(table, title: str) -> None:
        t = RichTable(title=title)
        for col in table.columns:
            t.add_column(col)
        for row in table.rows:
            t.add_row(*row)
        console.print(t)

    show(view.cells_table(found), f"headroom: the draft on this engine's fit ({path})")
    for line in view.summary_lines(found):
        console.print(line)
    show(view.al_for_table(found), "the AL a target speedup needs")
    if found["published"]:
        show(view.published_table(found["published"]), "published Kimi-K2.5 AL on this system (* k outside the sweep)")
