"""The `harness` typer app: every command, in the order `harness --help` lists them."""

from __future__ import annotations

import typer

from harness.cli.checkpoints import draft_app, verifier_app
from harness.cli.headroom import headroom_cmd
from harness.cli.jobs import train_and_bench_cmd, train_cmd
from harness.cli.measure import bench_cmd, canary_cmd, soak_cmd
from harness.cli.recipe import recipe_app
from harness.results.commands import register as register_results

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train EAGLE-3 drafts, serve them with vLLM, measure and gate acceptance.",
)
app.add_typer(verifier_app, name="verifier")
app.add_typer(draft_app, name="draft")
app.add_typer(recipe_app, name="recipe")
register_results(app)  # compare, report, gate
app.command("train")(train_cmd)
app.command("bench")(bench_cmd)
app.command("train-and-bench")(train_and_bench_cmd)
app.command("soak")(soak_cmd)
app.command("headroom")(headroom_cmd)
app.command("canary")(canary_cmd)
