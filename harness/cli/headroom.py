"""`harness headroom`: the speedup this engine allows at each acceptance, and the draft placed on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import JsonOpt, RecipeArg, SetOpt, progress, stdout


def _numbers(text: str, kind: type, option: str) -> tuple:
    from harness.errors import BadInput

    try:
        return tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise BadInput(f"{option} takes comma-separated numbers, e.g. {option} 1,2,3; got {text!r}") from None


def _ints(text: str, option: str) -> tuple[int, ...]:
    return _numbers(text, int, option)


def _floats(text: str, option: str) -> tuple[float, ...]:
    return _numbers(text, float, option)


def headroom_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    draft: Annotated[Path | None, typer.Option(help="The draft folder (EAGLE-3) to place on the fit.")] = None,
    ks: Annotated[str, typer.Option("--k", help="Draft tokens per step to sweep, comma-separated.")] = "1,2,3",
    concurrencies: Annotated[str, typer.Option("--concurrency", help="Loads to sweep, comma-separated.")] = "1,4",
    profiles: Annotated[
        str, typer.Option("--profile", help="Synthetic per-position acceptance p (rates p, p², ...), comma-separated.")
    ] = "0.5,0.9",
    repeats: Annotated[int, typer.Option(min=2, help="Paired batches per cell (the speedup's CI).")] = 3,
    num_prompts: Annotated[int, typer.Option(min=1, help="Prompts per batch (the recipe's suites).")] = 8,
    max_tokens: Annotated[int, typer.Option(min=8, help="Output tokens per request (forced: ignore_eos).")] = 64,
    target: Annotated[float, typer.Option(min=1.0, help="The speedup whose needed AL is reported.")] = 2.0,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Default results/headroom/<recipe>.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what the sweep costs; start nothing.")] = False,
    json_out: JsonOpt = False,
):
    """Fit this engine's step cost from synthetic acceptance (vLLM's synthetic rejection sampling, the
    draft running), then place the draft's measured cells on it: allowed speedup, efficiency, the AL a
    target speedup needs, the best k per load, and the published Kimi-K2.5 AL replayed here."""
    import json

    from harness.errors import BadInput
    from harness.headroom import HeadroomSettings, analyse, machine_busy, render, run_sweep, write_headroom
    from harness.paths import REPO_ROOT
    from harness.recipe import load_recipe
    from harness.results.headroom_view import write_headroom_pages

    r = load_recipe(recipe, set_ or [])
    settings = HeadroomSettings(
        _ints(ks, "--k"),
        _ints(concurrencies, "--concurrency"),
        _floats(profiles, "--profile"),
        repeats,
        num_prompts,
        max_tokens,
        target,
    )
    settings.check()
    out = run_dir or REPO_ROOT / "results" / "headroom" / r.name
    if dry_run:
        return _dry_run(r, settings, out)
    if draft is None:
        raise BadInput("harness headroom needs --draft DIR: the draft whose cost and acceptance are measured")
    with progress() as rep:
        points, engines = run_sweep(r, draft, out, settings, rep)
    write_headroom(out, settings, points, engines, {})  # the measurements first: an analysis that fails loses none
    found = {**analyse(points, settings), "machine": machine_busy(engines)}
    path = write_headroom(out, settings, points, engines, found)
    page = write_headroom_pages(found, path.parent)
    if json_out:
        print(json.dumps({"path": str(path), "page": str(page), **found}, indent=2))
    else:
        render(found, path, stdout())
        stdout().print(f"plot and tables: {page}")


def _dry_run(recipe, settings, out: Path) -> None:
    """What the sweep costs: engine starts, tokens, hours and GPU-hours (harness/plan/headroom_plan.py)."""
    from harness.plan.headroom_plan import headroom_plan, headroom_work

    loads = settings.concurrencies
    work = headroom_work(
        recipe,
        settings.engines(),
        loads,
        settings.batches() // len(loads),
        settings.num_prompts,
        settings.max_tokens,
    )
    cost = headroom_plan(recipe, out / "plan", work)
    hours = "?" if cost["wall_h"] is None else f"{cost['wall_h']:.2f} h"
    gpu = "" if cost["gpu_h"] is None else f", {cost['gpu_h']} GPU-hours"
    stdout().print(f"headroom sweep: {cost['work']} ({cost['tokens']} tokens), into {out}")
    stdout().print(f"  about {hours}{gpu}: {cost['figure']}; priced at {cost['priced_at']}")
