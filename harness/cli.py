"""The `harness` command line: thin commands that parse, call one function, render, exit.

Exit codes: 0 ok · 1 regression (gate) · 2 bad input or config · 3 infrastructure failure ·
4 internal error (traceback in a log) · 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP.
Heavy imports (torch, vLLM, pandas) happen inside command bodies so `--help` is instant.
Tables for people go to stdout, `--json` output is for machines, progress and logs go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Annotated, NoReturn, cast

import typer

from harness import interrupts
from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_INTERNAL, EXIT_INTERRUPTED, HarnessError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train EAGLE-3 drafts, serve them with vLLM, measure and gate acceptance.",
)
verifier_app = typer.Typer(no_args_is_help=True, help="Verifier checkpoints: stand-ins, layout, agreement.")
recipe_app = typer.Typer(no_args_is_help=True, help="Recipes.")
draft_app = typer.Typer(no_args_is_help=True, help="Draft checkpoints in any format vLLM serves.")
app.add_typer(verifier_app, name="verifier")
app.add_typer(draft_app, name="draft")
app.add_typer(recipe_app, name="recipe")


def _register_results() -> None:
    from harness.results.commands import register

    register(app)


_register_results()

RecipeArg = Annotated[Path | None, typer.Argument(help="Recipe TOML (default: train/tiny-kimi.toml).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a recipe value: --set train.epochs=5 (repeatable).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def _stderr():
    from harness.ui import stderr_console

    return stderr_console()


def _stdout():
    from harness.ui import stdout_console

    return stdout_console()


# Signals that end the harness the way Ctrl-C does (finally blocks run, engines close, the manifest
# says interrupted), each with the shell's exit code 128 + signal number.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _on_terminate(signum, frame) -> None:
    if not interrupts.record(signum):  # already unwinding: let the cleanup finish
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _interrupted_exit() -> NoReturn:
    sig = interrupts.received()
    code = 128 + sig if sig else EXIT_INTERRUPTED
    _stderr().print(
        f"[yellow]interrupted[/]{f' ({signal.Signals(sig).name})' if sig else ''}: "
        "finished work is kept; rerun the same command to resume"
    )
    sys.exit(code)


def _write_crash_log(exc: BaseException) -> Path | None:
    """The traceback of an unexpected error, in a file under $HARNESS_CACHE/crash/ (or None)."""
    import datetime as dt
    import os
    import traceback

    root = Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "harness")) / "crash"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    try:
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{stamp}.log"
        path.write_text(f"$ harness {' '.join(sys.argv[1:])}\n" + "".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return None


def _error_line(message: str) -> None:
    """The one line of an error; its text is not markup (torch's "[enforce fail at ...]" would vanish)."""
    from rich.markup import escape

    _stderr().print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _unexpected_exit(exc: BaseException) -> NoReturn:
    """Not a HarnessError: a full disk is infrastructure (3); anything else is a bug in the
    harness (4), never a code CI reads as a verdict. One line; the traceback goes to a log."""
    from harness.errors import DiskFull, is_disk_full

    if is_disk_full(exc):  # whatever the writer raised: OSError, torch's RuntimeError, safetensors'
        _error_line(DiskFull.from_exception(exc).message)
        sys.exit(EXIT_INFRA)
    log = _write_crash_log(exc)
    where = f"traceback in {log}" if log else "no traceback log could be written"
    _stderr().print(
        f"[bold red]internal error:[/] {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
        f"({where}; please report it)",
        highlight=False,
        soft_wrap=True,
    )
    sys.exit(EXIT_INTERNAL)


def main() -> None:
    """Entry point: run the app; a HarnessError becomes one clear line and its exit code.
    Exit codes: docs in harness/errors.py (0 ok, 1 gate regression, 2 bad input, 3 infrastructure,
    4 internal error, 128 + signal when interrupted: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    interrupts.clear()
    previous = {s: signal.getsignal(s) for s in _TERMINATING}
    for s in _TERMINATING:
        if previous[s] != signal.SIG_IGN:  # nohup'd or deliberately ignored: keep it so
            signal.signal(s, _on_terminate)
    try:
        _run_app()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _run_app() -> None:
    try:
        # Non-standalone typer *returns* the exit code of Ctrl-C (130) and of typer.Exit.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            if code == EXIT_INTERRUPTED:
                _interrupted_exit()
            sys.exit(code)
    except HarnessError as e:
        _error_line(e.message)
        sys.exit(e.exit_code)
    except (typer.Exit, SystemExit) as e:
        code = getattr(e, "exit_code", getattr(e, "code", 0))
        sys.exit(code or 0)
    except BaseException as e:  # Ctrl-C (click turns it into Abort), click usage errors
        aborts, usage_errors = _click_exceptions()
        if isinstance(e, (KeyboardInterrupt, *aborts)):
            _interrupted_exit()
        if isinstance(e, usage_errors):
            e.show()  # type: ignore[attr-defined]  # a click usage error: the usage line and "Error: ...", as click prints it
            if getattr(e, "ctx", None) is None:  # e.g. an option missing its value: click prints no usage
                _stderr().print(f"Try '{_command_words()} --help' for usage.", highlight=False)
            sys.exit(EXIT_BAD_INPUT)
        _unexpected_exit(e)


def _command_words() -> str:
    """`harness` and the (sub)command words the user typed, up to the first option or argument
    that is not a command name."""
    import typer.main

    words, cmd = ["harness"], typer.main.get_command(app)
    for arg in sys.argv[1:]:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            break
        words.append(arg)
        cmd = sub
    return " ".join(words)


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(abort, usage-error) exception classes of the click the installed typer parses with: typer
    >= 0.24 vendors click as `typer._click`, whose exceptions are not `click`'s, so both are named
    (a usage error caught as neither is reported as a bug, exit 4)."""
    aborts: list[type[BaseException]] = []
    usage: list[type[BaseException]] = []
    with contextlib.suppress(ImportError):
        from typer._click.exceptions import ClickException  # type: ignore[import-not-found]
        from typer.exceptions import Abort  # type: ignore[attr-defined]

        aborts.append(Abort)
        usage.append(ClickException)
    with contextlib.suppress(ImportError):
        import click

        aborts.append(click.exceptions.Abort)
        usage.append(click.exceptions.ClickException)
    return tuple(aborts), tuple(usage)


# ----------------------------------------------------------------------------- verifier


@verifier_app.command("make-standin")
def make_standin(
    out: Annotated[Path, typer.Argument(help="Folder to write the stand-in checkpoint into.")],
    arch: Annotated[str, typer.Option(help="kimi-k2.5 | deepseek-v3 | llama")] = "kimi-k2.5",
    num_layers: Annotated[int | None, typer.Option(help="Decoder layers (default per arch).")] = None,
    pretrain_steps: Annotated[int | None, typer.Option(help="Pretraining steps (default per arch).")] = None,
    rope: Annotated[str | None, typer.Option(help="yarn | default (default per arch).")] = None,
    thinking: Annotated[
        bool,
        typer.Option(
            help="Kimi-K2.5's thinking format (<think> tokens, a template that takes `thinking`, pretrained "
            "to think first): the default recipe's stand-in is this with --pretrain-steps 300."
        ),
    ] = False,
    long_seq_len: Annotated[int, typer.Option(help="Window of the long-context tail (with --long-steps).")] = 0,
    long_steps: Annotated[
        int, typer.Option(help="Pretraining steps after the main schedule at --long-seq-len windows (0: none).")
    ] = 0,
    json_out: JsonOpt = False,
):
    """Build a tiny, architecture-faithful verifier locally (no hub); cached per spec."""
    import shutil

    from harness.verifier.standins.build import ensure_standin
    from harness.verifier.standins.specs import spec_for

    spec = spec_for(
        arch,
        num_layers=num_layers,
        pretrain_steps=pretrain_steps,
        rope=rope,
        thinking=thinking or None,
        long_seq_len=long_seq_len or None,
        long_steps=long_steps or None,
    )
    err = _stderr()
    cached = ensure_standin(spec, log=lambda s: err.print(f"[dim]{s}[/]"))
    if out.exists() and any(out.iterdir()):
        from harness.errors import BadInput

        raise BadInput(f"{out}: exists and is not empty; choose a new folder")
    shutil.copytree(cached, out, dirs_exist_ok=True)
    meta = json.loads((out / "standin.json").read_text())
    if json_out:
        print(json.dumps({"path": str(out), **meta}, indent=2))
        return
    q = meta["quality"]
    _stdout().print(
        f"[bold]{arch}[/] stand-in at {out}\n"
        f"  params {meta['num_params']:,} · pretraining loss {meta['loss_first']:.2f} -> {meta['loss_last']:.2f} "
        f"· built in {meta['build_s']}s (cache: {cached})\n"
        f"  greedy continuations: distinct-token ratio {q['distinct_token_ratio']:.2f} "
        f"(min {q['min_distinct_token_ratio']:.2f}; 1/64 = one token repeated), "
        f"{q['distinct_continuations']}/{q['num_prompts']} prompts give different text"
    )


@verifier_app.command("inspect")
def inspect_cmd(
    path: Annotated[Path | None, typer.Argument(help="Checkpoint folder.")] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            help="Instead of PATH: a bundled real structure (config.json + full index, no weights), e.g. kimi-k2.5."
        ),
    ] = None,
    json_out: JsonOpt = False,
):
    """The loader's view of a checkpoint, from config.json and the index alone (no weights read)."""
    import tempfile

    from harness.errors import BadInput
    from harness.verifier.bundled import REFERENCES, write_reference
    from harness.verifier.inspect_view import render_layout
    from harness.verifier.layout import resolve_layout

    if (path is None) == (reference is None):
        raise BadInput("give a checkpoint PATH or --reference NAME (one of them)")
    if reference is None:
        layout = resolve_layout(cast(Path, path))  # exactly one of them is given
    else:
        if reference not in REFERENCES:
            raise BadInput(f"unknown reference {reference!r}; bundled: {', '.join(REFERENCES)}")
        with tempfile.TemporaryDirectory(prefix=f"harness-{reference}-") as tmp:
            layout = resolve_layout(write_reference(reference, Path(tmp)))
    if json_out:
        print(json.dumps(layout.to_dict(), indent=2))
    else:
        render_layout(layout, _stdout())


@draft_app.command("inspect")
def draft_inspect_cmd(
    path: Annotated[
        Path,
        typer.Argument(
            help="Draft folder (speculators, SpecForge/EAGLE-3, MLA EAGLE-3, P-EAGLE, or a checkpoint with MTP layers)."
        ),
    ],
    verifier: Annotated[
        Path | None, typer.Option(help="Verifier checkpoint: also check the draft fits it (exit 2 if not).")
    ] = None,
    json_out: JsonOpt = False,
):
    """Format, shape and recorded verifier of a draft, from its folder alone; with --verifier, whether it fits."""
    from harness.draft.fit_check import aux_ids_in_use
    from harness.draft.formats import inspect_draft
    from harness.draft.guard import fit_problems
    from harness.draft.inspect_view import render_draft
    from harness.verifier.layout import resolve_layout

    info, problems, aux = inspect_draft(path), None, None
    if verifier is not None:
        layout = resolve_layout(verifier)
        info, problems = fit_problems(path, layout)
        aux = aux_ids_in_use(info, layout)
    if json_out:
        extra = {} if verifier is None else {"verifier": str(verifier), "fits": not problems, "problems": problems}
        print(json.dumps({**info.to_dict(), **extra}, indent=2))
    else:
        render_draft(info, _stdout(), str(verifier) if verifier else None, problems, aux)
    if problems:
        raise typer.Exit(2)


# ----------------------------------------------------------------------------- train / bench


@contextlib.contextmanager
def _progress():
    """One rich progress display on stderr for the command's stages, always closed."""
    from harness.ui import RichReporter

    rep = RichReporter()
    try:
        yield rep
    finally:
        rep.close()


def _show_dry_run(
    recipe, train_dir: Path, include_bench: bool, json_out: bool, allow: list[str] | None, fit: dict | None = None
) -> None:
    """Print the plan; exit 2 when it predicts a failure on its [cluster] that --allow did not accept."""
    from harness.errors import BadInput
    from harness.plan.dry_run import dry_run_plan, render_plan

    plan = dry_run_plan(recipe, train_dir, include_bench=include_bench, allow=allow)
    if fit is not None:
        plan["budget"] = fit
    print(json.dumps(plan, indent=2)) if json_out else render_plan(plan, _stdout())
    if failed := plan["checks"]["predicted_failures"]:
        names = ", ".join(f["name"] for f in failed)
        raise BadInput(
            f"dry run of {recipe.name}: {len(failed)} predicted failure(s) on its cluster ({names}); fix the "
            "settings each names, or accept one by name with --allow NAME"
        )


def _fit_budget(recipe, train_dir: Path, gpu_hours: float | None, hours: float | None):
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


@app.command("train")
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
        return _show_dry_run(r, run_dir, False, json_out, allow)
    from harness.train.pipeline import run_train

    with _progress() as rep:
        res = run_train(r, run_dir, rep)
    if json_out:
        print(json.dumps({"draft": str(res.draft_dir), **res.report.to_dict()}, indent=2, default=str))
        return
    from harness.train.summary import render_train_summary

    render_train_summary(res, _stdout())


@app.command("bench")
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
    from harness.bench.run import bench_run_dir, run_bench
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
    with _progress() as rep:
        if draft is not None:  # a broken draft is named now, not in an engine's log later
            check_checkpoint_files(draft, "draft")
        drafts = resolve_drafts(r, resolve_verifier(r, rep), draft)
        run_bench(r, drafts, run_dir, rep, resume=resume, shard=part)
    if resume and (stale := ensure_tables(run_dir)):  # a resume with nothing left to measure writes no cell
        _stderr().print(f"[dim]rebuilt {run_dir / 'results.parquet'} and results.csv from cells/ ({stale})[/]")
    from harness.bench.summary import render_bench_summary

    render_bench_summary(run_dir, _stdout(), as_json=json_out)


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
        _stderr().print(f"merged {run_dir}: {what} ({new})", highlight=False, soft_wrap=True)
    else:
        _stderr().print(f"{run_dir} is up to date: {what}, nothing changed", highlight=False, soft_wrap=True)
    render_bench_summary(run_dir, _stdout(), as_json=json_out)


@app.command("train-and-bench")
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
            render_rows(rows, _stdout())
    r, fit = _fit_budget(r, (run_dir or default_run_dir(r)) / "train", budget_gpu_hours, budget_hours)
    out = run_dir or default_run_dir(r)
    if dry_run:  # writes nothing
        return _show_dry_run(r, out / "train", True, json_out, allow, fit)
    from harness.bench.shards import refuse_mixed_layout

    refuse_mixed_layout(out, None)  # a folder spread over nodes is bench --shard's and --merge's, not the main job's
    if fit is not None:
        sets = " ".join(f"--set {x}" for c in fit["changes"] for x in c["set"].split())
        _stderr().print(f"[dim]fitted to the budget: {sets}[/]", highlight=False)
    if rows is not None:
        from harness.provenance import atomic_write_json

        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "rehearsal.json", {"settings": [row.to_dict() for row in rows]})
    with _progress() as rep:
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
        render_summary(res, _stdout())
        if cost and rows is not None:
            from harness.plan.cost import render_cost

            render_cost(cost, _stdout())
        elif cost:
            from harness.plan.cost_measured import planned_vs_measured

            _stdout().print(planned_vs_measured(cost), highlight=False, soft_wrap=True)
    exit_for(res)


@app.command("soak")
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
    with _progress() as rep:
        windows = run_soak(r, draft, out, settings, rep)
    render_soak(out, windows, _stdout(), as_json=json_out)
    raise typer.Exit(soak_exit(windows))


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


@verifier_app.command("agree")
def agree_cmd(
    path: Annotated[Path, typer.Argument(help="Verifier checkpoint folder.")],
    threshold: Annotated[float, typer.Option(help="Minimum greedy-token agreement.")] = 0.97,
    num_prompts: Annotated[int, typer.Option(help="Built-in prompts to generate from.")] = 16,
    max_tokens: Annotated[int, typer.Option(help="Greedy tokens per prompt.")] = 64,
    cpu_workarounds: Annotated[str, typer.Option(help="auto | off (off reproduces the CPU defects).")] = "auto",
    max_model_len: Annotated[int, typer.Option(help="vLLM context length.")] = 512,
    layers: Annotated[
        bool, typer.Option("--layers", help="Also compare every layer's residual stream (vLLM probed in its worker).")
    ] = False,
    json_out: JsonOpt = False,
):
    """Do vLLM and the training forward (transformers) see the same verifier? Greedy-token agreement,
    and with --layers the relative difference of every layer's hidden states."""
    from harness.errors import BadInput
    from harness.recipe import EngineSettings
    from harness.train.agree import check_agreement
    from harness.verifier.layout import resolve_layout

    layout = resolve_layout(path)
    settings = EngineSettings(max_model_len=max_model_len, cpu_workarounds=cpu_workarounds)
    report, hints, workarounds = check_agreement(layout, settings, num_prompts, max_tokens)
    out = {**report.to_dict(), "threshold": threshold, "hints": hints, "workarounds": workarounds}
    if layers or report.agreement < threshold:
        from transformers import AutoTokenizer

        from harness.train.agree import locate_disagreement

        tok = AutoTokenizer.from_pretrained(layout.path, trust_remote_code=settings.trust_remote_code)
        ids = tok.apply_chat_template(
            [{"role": "user", "content": "Explain how exceptions propagate through nested calls."}],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
        )
        # tokenize=True, return_dict=False: the token ids
        out["layer_differences"] = locate_disagreement(layout, settings, cast("list[int]", ids), hints)
    if json_out:
        print(json.dumps(out, indent=2))
    else:
        con = _stdout()
        con.print(
            f"agreement {report.agreement:.1%} over {report.num_tokens} greedy tokens of {report.num_responses} "
            f"responses ({report.responses_fully_equal} identical end to end); workarounds: "
            f"{', '.join(workarounds) or 'none'}"
        )
        for r in out.get("layer_differences", []):
            con.print(
                f"  aux id {r['aux_id']:3d}: relative L2 difference {r['rel_l2']:.2%} "
                f"(first token {r['first_token_rel']:.2%}, worst token {r['max_rel_per_token']:.2%})"
            )
    if report.agreement < threshold:
        raise BadInput(
            f"vLLM and transformers agree on only {report.agreement:.1%} of greedy tokens "
            f"(threshold {threshold:.0%}): {'; '.join(hints)}"
        )


# ----------------------------------------------------------------------------- recipe


@recipe_app.command("show")
def recipe_show(recipe: RecipeArg = None, set_: SetOpt = None):
    """Print the resolved recipe (defaults + file + --set) as TOML-like JSON."""
    from harness.recipe import load_recipe

    r = load_recipe(recipe, set_ or [])
    print(json.dumps(r.model_dump(mode="json"), indent=2))


if __name__ == "__main__":
    main()
