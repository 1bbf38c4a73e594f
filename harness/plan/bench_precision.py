"""What the bench's answers are worth before it runs: per concurrency the requests a cell sends and
the CI half-widths they buy, and per question of the recipe (best k per load, speedup per suite,
thinking on/off, T = 0/1) how the plan answers it and with what precision.

  AL per cell           1.96 * sd / sqrt(n)                      n: requests of the speculative arm
  AL per suite          1.96 * sd / sqrt(sum of n over loads)    at T = 0 a draft's AL does not
                                                                 depend on the load
  speedup per cell      1.96 * sqrt((sd / AL)^2 / n + 2 cv^2)    relative; a request's speedup moves
                                                                 with its tokens per step, and each
                                                                 arm's engine start adds cv

The figures (sd, AL, cv) are priors stated with their sources; the run measures the real CIs. Pure.
"""

from __future__ import annotations

import math
from typing import Any

from harness.recipe import Recipe

Z95 = 1.96
# sd of one request's AL: the demo's chat@think cell (8 prompts x 96 tokens, k = 3) read AL SE 0.055
# (results/baselines/tiny-kimi/baseline.json), so sd = 0.055 x sqrt(8); longer outputs vary less
AL_SD_PER_REQUEST = (0.16, "measured: the CPU demo's chat@think cell, AL SE 0.055 over 8 prompts x 96 tokens")
# the AL a precision is stated at: the published Kimi-K2.5 EAGLE-3 drafts' MT-Bench to MATH500 range, k = 3
AL_PRIOR = (3.0, "cited: published Kimi-K2.5 EAGLE-3 drafts at k = 3, AL 2.69-3.34 (docs/facts.md §1)")
# an engine start's own throughput spread, which one run's request-level CI does not carry
SPEEDUP_CV_BETWEEN_RUNS = (
    0.02,
    "assumption: GPU decode throughput from one engine start to the next within 2 %; measure it with A/A reruns",
)


def _al_half_width(n: int) -> float | None:
    return None if n < 2 else Z95 * AL_SD_PER_REQUEST[0] / math.sqrt(n)


def _speedup_half_width(n: int) -> float | None:
    if n < 2:
        return None
    cv_req, cv_run = AL_SD_PER_REQUEST[0] / AL_PRIOR[0], SPEEDUP_CV_BETWEEN_RUNS[0]
    return Z95 * math.sqrt(cv_req**2 / n + 2 * cv_run**2)


def by_concurrency(recipe: Recipe, prompts_per_suite: int | None) -> dict[int, dict[str, Any]]:
    """Per concurrency: prompts and requests of one speculative arm, and the CI half-widths they buy."""
    b = recipe.bench
    out = {}
    for c in sorted(set(b.concurrency) | {x.concurrency for x in b.extra_cells}):
        prompts = b.prompts_at(c, prompts_per_suite) if prompts_per_suite else b.max_prompts_by_concurrency.get(c)
        n = (prompts or 0) * b.repeats
        al, sp = _al_half_width(n), _speedup_half_width(n)
        out[c] = {
            "prompts": prompts,
            "requests_per_arm": n,
            "al_ci_half_width": None if al is None else round(al, 3),
            "speedup_ci_half_width_pct": None if sp is None else round(100 * sp, 1),
        }
    return out


def questions(recipe: Recipe, prompts_per_suite: int | None) -> dict[str, Any]:
    """How the plan answers each question its matrix asks, with the precision it leaves."""
    b = recipe.bench
    per_c = by_concurrency(recipe, prompts_per_suite)
    pooled = _al_half_width(sum(v["requests_per_arm"] for v in per_c.values()))
    widths = ", ".join(f"c={c} ±{v['speedup_ci_half_width_pct']} %" for c, v in per_c.items())
    measured = b.engine_ks
    if b.k_from_one_engine and len(measured) >= 2:
        k_how = (
            f"k = {', '.join(map(str, measured))} measured at every load; AL at every k <= {max(b.k)} from the k = "
            f"{max(b.k)} engine's per-step records (harness/analysis/k_sweep.py; on CPU every estimate fell inside "
            "the separate engine's CI, README); speedup at the other ks from the step-cost line through the measured "
            "ks (harness/analysis/k_speedup.py), reported with the ks it cannot tell from the best"
        )
    elif b.k_from_one_engine:
        k_how = f"AL at every k from the k = {max(b.k)} engine; speedup at k = {max(b.k)} only: set bench.k_measured"
    else:
        k_how = f"every k = {', '.join(map(str, b.k))} its own engine"
    return {
        "best k per load": {"how": k_how, "precision": f"speedup CI half-width per measured cell: {widths}"},
        "speedup per suite": {
            "how": f"every suite at every load ({len(b.concurrency)} concurrencies), thinking and T as below",
            "precision": widths,
        },
        "acceptance per suite": {
            "how": "AL pooled over the suite's loads (T = 0: AL does not depend on the load)",
            "precision": None if pooled is None else f"AL ±{pooled:.3f}",
        },
        "thinking on/off": {"how": f"both modes, every cell: thinking {b.thinking}", "precision": widths},
        "T = 0 / 1": {"how": f"every cell at T in {b.temperature}", "precision": widths},
        "figures": [
            {"key": "al_sd_per_request", "value": AL_SD_PER_REQUEST[0], "source": AL_SD_PER_REQUEST[1]},
            {"key": "al_prior", "value": AL_PRIOR[0], "source": AL_PRIOR[1]},
            {
                "key": "speedup_cv_between_runs",
                "value": SPEEDUP_CV_BETWEEN_RUNS[0],
                "source": SPEEDUP_CV_BETWEEN_RUNS[1],
            },
        ],
        "by_concurrency": per_c,
    }
