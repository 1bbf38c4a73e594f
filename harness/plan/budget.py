"""Fit a plan's bench to a budget (--budget-gpu-hours / --budget-hours): the bench's levers applied in
order, each only while the plan is over budget, every change said as the `--set` that makes it.

  1. bench.repeats -> 1              one engine start measures once; the one-at-a-time schedule's
                                     ABA and the machine sentinels already carry drift, and repeats
                                     inside one start do not carry run-to-run variation
  2. bench.k_from_one_engine         AL at every k from the largest k's engine, speedup from it and one
     + bench.k_measured               more measured k through the step-cost line (k_speedup.py)
  3. prompts at the lowest loads     bench.max_prompts_by_concurrency halved at the lowest concurrency,
                                     then the next, down to MIN_PROMPTS: a batch-1 arm decodes its
                                     requests one after another and costs the most per token
  4. bench.num_prompts               halved, down to MIN_PROMPTS

The training stages are not shrunk: what they cost is the draft's quality, a question for the
recipe's author. Pure: `cost_of` prices a recipe (the dry run's cost section).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from harness.recipe import Recipe

MIN_PROMPTS = 8
Cost = dict[str, Any]  # a dry run's cost section (harness/plan/cost.py plan_cost)


@dataclass(frozen=True)
class Step:
    setting: str  # the --set value(s) that make it, space-separated
    why: str
    total: float  # the plan's GPU-hours (or hours) after it


@dataclass(frozen=True)
class Fit:
    recipe: Recipe
    steps: tuple[Step, ...]
    total: float
    fits: bool

    def to_dict(self, budget: float, unit: str) -> dict[str, Any]:
        return {
            "budget": budget,
            "unit": unit,
            "total": round(self.total, 1),
            "fits": self.fits,
            "changes": [{"set": s.setting, "why": s.why, "total_after": round(s.total, 1)} for s in self.steps],
        }


def _set(recipe: Recipe, key: str, value: Any) -> Recipe:
    section, field = key.split(".")
    part = getattr(recipe, section).model_copy(update={field: value})
    return recipe.model_copy(update={section: type(part).model_validate(part.model_dump())})


def _middle_k(ks: list[int]) -> int:
    """The k measured beside the largest: 3 (the published drafts' and vLLM's CI k) when swept, else the median."""
    return 3 if 3 in ks[:-1] else ks[(len(ks) - 1) // 2]


Lever = tuple[list[tuple[str, Any]], str]  # the (key, value) changes made together, and why


def _levers(recipe: Recipe, prompts: int | None) -> Iterator[Lever]:
    """The levers in order; each value given the recipe as the earlier levers left it."""
    b = recipe.bench
    if b.repeats > 1:
        yield [("bench.repeats", 1)], "one engine start measures once (ABA and sentinels carry drift)"
    ks = sorted(b.k)
    if len(ks) > 2 and not b.k_from_one_engine:
        yield (
            [("bench.k_from_one_engine", True), ("bench.k_measured", [_middle_k(ks)])],
            f"AL at every k from the k = {ks[-1]} engine; a second measured k fixes the step-cost line",
        )
    caps = dict(b.max_prompts_by_concurrency)
    for c in sorted(b.concurrency):
        n = caps.get(c, prompts or 0)
        while n // 2 >= MIN_PROMPTS:
            n //= 2
            caps[c] = n
            yield [("bench.max_prompts_by_concurrency", dict(caps))], f"{n} prompts per suite at concurrency {c}"
    n = b.num_prompts or prompts or 0
    while n // 2 >= MIN_PROMPTS:
        n //= 2
        yield [("bench.num_prompts", n)], f"{n} prompts per suite"


def _format(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return f"{key}={{{','.join(f'{k}={v}' for k, v in value.items())}}}"
    if isinstance(value, bool):
        return f"{key}={'true' if value else 'false'}"
    if isinstance(value, list):
        return f"{key}=[{','.join(map(str, value))}]"
    return f"{key}={value}"


def fit_budget(recipe: Recipe, budget: float, cost_of: Callable[[Recipe], Cost], key: str, prompts: int | None) -> Fit:
    """Apply the levers while the plan's `key` total ('gpu_h' or 'wall_h') is over `budget`."""
    total = cost_of(recipe)["total"][key]
    steps: list[Step] = []
    for changes, why in _levers(recipe, prompts):
        if total is None or total <= budget:
            break
        for lever, value in changes:
            recipe = _set(recipe, lever, value)
        total = cost_of(recipe)["total"][key]
        steps.append(Step(" ".join(_format(k, v) for k, v in changes), why, total))
    return Fit(recipe, tuple(steps), total or 0.0, total is not None and total <= budget)
