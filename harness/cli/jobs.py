"""`harness train` and `harness train-and-bench` (the main job), their dry run (the plan, exit 2 on a
predicted failure), the budget fit, and the run's measured cost beside the plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer

from harness.cli.common import JsonOpt, RecipeArg, SetOpt, progress, stderr, stdout

BudgetGpuOpt = Annotated[
    float | None,
    typer.Option(
        "--budget-gpu-hours",
        min=0,
        help="Fit the bench to this many GPU-hours for the whole plan: repeats, measured ks and prompts shrink "
        "in order until it fits (harness/plan/budget.py); the plan says what changed and what precision is left.",
    ),
]
BudgetHoursOpt = Annotated[
    float | None,
    typer.Option("--budget-hours", min=0, help="As --budget-gpu-hours, in wall hours (CPU plans too)."),
]
AllowOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        help="With --dry-run: accept a predicted failure by name (serving-gpus, training-gpus, bench-engines, "
        "extraction-memory, training-memory, disk); repeatable.",
    ),
]


def show_dry_run(
    recipe, train_dir: Path, include_bench: bool, json_out: bool, allow: list[str] | None, fit: dict | None = None
) -> None:
    """Print the plan; exit 2 when it predicts a failure on its [cluster] that --allow did not accept."""
    from harness.errors import BadInput
    from harness.plan.dry_run import dry_run_plan, render_plan

    plan = dry_run_plan(recipe, train_dir, include_bench=include_bench, allow=allow)
    if fit is not None:
        plan["budget"] = fit
    print(json.dumps(plan, indent=2)) if json_out else render_plan(plan, stdout())
    if failed := plan["checks"]["predicted_failures"]:
        names = ", ".join(f["name"] for f in failed)
        raise BadInput(
            f"dry run of {recipe.name}: {len(failed)} predicted failure(s) on its cluster ({names}); fix the "
            "settings each names, or accept one by name with --allow NAME"
        )


def fit_budget(recipe, train_dir: Path, gpu_hours: float | None, hours: float | None):
    """The recipe with its bench fitted to --budget-gpu-hours / --budget-hours (harness/plan/budget.py),
    and what the fit changed; (recipe, None) without a budget."""
    if gpu_hours is None and hours is None:
        return recipe, None
    from harness.errors import BadInput
    from harness.plan.budget import fit_budget
    from harness.plan.dry_run import dry_run_plan
    from harness.plan.hardware import NAMES

    if gpu_hours is not None and hours is not None:
        raise BadInput("give one budget: --budget-gpu-hours or --budget-hours")
    key, budget = ("gpu_h", gpu_hours) if gpu_hours is not None else ("wall_h", cast(float, hours))
    if key == "gpu_h" and recipe.engine.device != "cuda":
        raise BadInput("--budget-gpu-hours needs engine.device 'cuda' (a CPU plan holds no GPUs): use --budget-hours")

    def cost_of(r):
        return dry_run_plan(r, train_dir, include_bench=True, allow=list(NAMES))["cost"]

    fit = fit_budget(recipe, float(budget), cost_of, key, recipe.bench.num_prompts)
    out = fit.to_dict(float(budget), "GPU-hours" if key == "gpu_h" else "hours")
    if not fit.fits:
        raise BadInput(
            f"the plan cannot fit {budget:g} {out['unit']}: {out['total']:g} after "
            + (f"every bench lever ({', '.join(c['set'] for c in out['changes'])})" if out["changes"] else "no lever")
            + "; what is left is the training stages' and the bench's floor: shrink train.num_prompts or raise "
            "the budget"
        )
    return fit.recipe, out


def train_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    out: Annotated[
        Path | None, typer.Option(help="Run folder (default runs/train/<recipe name>); rerun to resume.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print and validate every command and config; run nothing.")
    ] = False,
    json_out: JsonOpt = False,
    allow: AllowOpt = None,
):
    """Train an EAGLE-3 draft for the recipe's verifier (prompts -> responses -> states -> draft)."""
    from harness.paths import REPO_ROOT
    from harness.recipe import load_recipe

    r = load_recipe(recipe, set_ or [])
    run_dir = out or REPO_ROOT / "runs" / "train" / r.name
    if dry_run:
        return show_dry_run(r, run_dir, False, json_out, allow)
    from harness.train.pipeline import run_train

    with progress() as rep:
        res = run_train(r, run_dir, rep)
    if json_out:
        print(json.dumps({"draft": str(res.draft_dir), **res.report.to_dict()}, indent=2, default=str))
    else:
        from harness.train.summary import render_train_summary

        render_train_summary(res, stdout())
    from harness.train.health import act_on_health

    act_on_health(r, res.report.health, res.draft_dir, lambda _: None)  # "stop": exit 2 (the summary says why)


def train_and_bench_cmd(
    recipe: RecipeArg = None,
    set_: SetOpt = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Run folder (default results/runs/<recipe>-<fingerprint>; rerun to resume)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Resolve and validate the whole plan; run nothing.")
    ] = False,
    rehearse: Annotated[
        bool,
        typer.Option(
            "--rehearse",
            help="Run the recipe on this CPU: the stand-in of its verifier's architecture, sizes shrunk, every "
            "other setting as written; prints which settings ran as written (harness/rehearsal.py).",
        ),
    ] = False,
    json_out: JsonOpt = False,
    allow: AllowOpt = None,
    budget_gpu_hours: BudgetGpuOpt = None,
    budget_hours: BudgetHoursOpt = None,
):
    """The main job: train a draft, bench it against the baseline, report and gate (default: the tiny
    Kimi-K2.5 stand-in on CPU)."""
    from harness.main_job import default_run_dir, exit_for, render_summary, run_train_and_bench
    from harness.recipe import load_recipe

    r = load_recipe(recipe, set_ or [])
    rows = None
    if rehearse:
        from harness.rehearsal import rehearsal_recipe, render_rows, verifier_model_type

        r, rows = rehearsal_recipe(r, verifier_model_type(r))
        if not json_out:
            render_rows(rows, stdout())
    r, fit = fit_budget(r, (run_dir or default_run_dir(r)) / "train", budget_gpu_hours, budget_hours)
    out = run_dir or default_run_dir(r)
    if dry_run:  # writes nothing
        return show_dry_run(r, out / "train", True, json_out, allow, fit)
    from harness.bench.shards import refuse_mixed_layout

    refuse_mixed_layout(out, None)  # a folder spread over nodes is bench --shard's and --merge's, not the main job's
    if fit is not None:
        sets = " ".join(f"--set {x}" for c in fit["changes"] for x in c["set"].split())
        stderr().print(f"[dim]fitted to the budget: {sets}[/]", highlight=False)
    if rows is not None:
        from harness.provenance import atomic_write_json

        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "rehearsal.json", {"settings": [row.to_dict() for row in rows]})
    with progress() as rep:
        res = run_train_and_bench(r, rep, out)
    cost = _run_cost(r, out, rehearsal=rows is not None)
    if json_out:
        print(
            json.dumps(
                {"rows": res.summary_rows, "paths": res.paths, "wall_s": res.wall_s, "gate_exit": res.gate_exit}
                | ({"cost": cost} if cost else {}),
                indent=2,
            )
        )
    else:
        render_summary(res, stdout())
        if cost and rows is not None:
            from harness.plan.cost_render import render_cost

            render_cost(cost, stdout())
        elif cost:
            from harness.plan.cost_measured import planned_vs_measured

            stdout().print(planned_vs_measured(cost), highlight=False, soft_wrap=True)
    exit_for(res)


def _run_cost(recipe, out: Path, rehearsal: bool) -> dict | None:
    """What the run measured, stage by stage, beside the dry run's plan for the same recipe (its hours
    and the model's prediction for the work done); stored in cost.json (and a rehearsal's
    rehearsal.json under "cost")."""
    from harness.errors import BadInput
    from harness.plan.cost_measured import measured_costs
    from harness.plan.dry_run import dry_run_plan
    from harness.provenance import atomic_write_json

    try:  # the plan of the recipe that just ran: its figures and its (upper-bound) tokens
        planned = dry_run_plan(recipe, out / "train", include_bench=True).get("cost")
    except BadInput:
        planned = None
    cost = measured_costs(out, recipe, planned)
    atomic_write_json(out / "cost.json", cost)
    if rehearsal:
        data = json.loads((out / "rehearsal.json").read_text())
        atomic_write_json(out / "rehearsal.json", {**data, "cost": cost})
    return cost
