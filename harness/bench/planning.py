"""Before any engine starts: the recipe's suites, the cells planned over them, and every suite's
prompts rendered by each verifier's tokenizer and checked against its context (a prompt too long,
or a suite of random token ids, stops the run here, in a second)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.bench.grid import CellSpec, plan_grid, recipe_suite_aliases
from harness.cluster import engine_schedule
from harness.draft.under_test import DraftUnderTest
from harness.draft.verifier import load_tokenizer
from harness.engine.settings import engine_plan
from harness.errors import BadInput
from harness.prompts import PromptRecord, render
from harness.recipe import Recipe
from harness.suites import Suite, load_suites, with_prefix_caching, with_thinking
from harness.verifier.layout import VerifierLayout

Prompts = list[tuple[PromptRecord, list[int]]]


def recipe_suites(recipe: Recipe) -> list[Suite]:
    """The recipe's suites, a `PATH#by-category` file expanded into one suite per category."""
    b = recipe.bench
    return with_prefix_caching(
        with_thinking(load_suites(b.suites, b.num_prompts, b.hf_field_map), b.thinking), b.prefix_caching
    )


def plan_cells(recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]) -> list[CellSpec]:
    """harness/bench/grid.py plan_grid over the loaded suites (bench.extra_cells may name a suite by
    its recipe spec, its name before a thinking mode, or its own name)."""
    names = [s.name for s in suites]
    return plan_grid(recipe.bench, [d.label for d in drafts], names, recipe_suite_aliases(recipe.bench, names))


def render_requests(tokenizer, suite: Suite, max_prompt: int, allow_random: bool = False) -> Prompts:
    """The suite's prompts as token ids; refuses a prompt that does not fit, and a suite of
    random-token prompts unless `allow_random` (bench.allow_random_prompts)."""
    out = []
    for rec in suite.records:
        ids = render(tokenizer, rec)
        if len(ids) > max_prompt:
            raise BadInput(
                f"suite {suite.name}: prompt {rec.id} has {len(ids)} tokens, more than "
                f"engine.max_model_len - bench.max_tokens = {max_prompt}; raise engine.max_model_len, "
                "lower bench.max_tokens or drop the prompt"
            )
        out.append((rec, ids))
    flag = random_suite_flag(tokenizer, out)
    if flag and not allow_random:
        raise BadInput(
            f"suite {suite.name}: {flag.partition(': ')[2]}; use text users send, or set "
            "bench.allow_random_prompts = true to measure them anyway (their cells are flagged)"
        )
    return out


def random_suite_flag(tokenizer, prompts: Prompts) -> str | None:
    """RANDOM PROMPTS when most of the rendered prompts look like random token ids
    (harness/analysis/content.py)."""
    from harness.analysis.content import random_suite

    return random_suite([ids for _, ids in prompts], len(tokenizer))


def check_prompts_fit(recipe: Recipe, layout: VerifierLayout) -> None:
    """The recipe's suites load, have distinct names and fit the verifier's context (the main
    job asks before training, not after)."""
    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    for s in recipe_suites(recipe):
        render_requests(
            tok, s, recipe.engine.max_model_len - recipe.bench.max_tokens, recipe.bench.allow_random_prompts
        )


def render_all(
    recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]
) -> dict[str, tuple[Any, dict[str, Prompts]]]:
    """Every suite's prompts rendered by each verifier's tokenizer, before any engine: a prompt
    longer than engine.max_model_len - bench.max_tokens is refused now, in a second. Offline
    engine hosts are spawned first, so vLLM imports while the prompts render."""
    out = {}
    max_prompt = recipe.engine.max_model_len - recipe.bench.max_tokens
    for layout, _ in drafts_by_verifier(drafts):
        # offline: the baseline and the first speculative engine side by side, or (engines one at a
        # time) each engine on the host the last one left
        if recipe.bench.engine == "offline":
            from harness.engine.offline import prespawn

            prespawn(engine_plan(recipe.engine, layout), 2 if engine_schedule(recipe) == "side_by_side" else 1)
        tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
        out[layout.path] = (
            tok,
            {s.name: render_requests(tok, s, max_prompt, recipe.bench.allow_random_prompts) for s in suites},
        )
    return out


def drafts_by_verifier(drafts: list[DraftUnderTest]) -> Iterator[tuple[VerifierLayout, list[DraftUnderTest]]]:
    layouts = {d.verifier.path: d.verifier for d in drafts}
    for path, layout in layouts.items():
        yield layout, [d for d in drafts if d.verifier.path == path]
