"""The `harness` command line: thin commands that parse, call one function, render, exit.

Exit codes: 0 ok · 1 regression (gate) · 2 bad input or config · 3 infrastructure failure.
Heavy imports (torch, vLLM, pandas) happen inside command bodies so `--help` is instant.
Tables for people go to stdout, `--json` output is for machines, progress and logs go to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.errors import HarnessError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train EAGLE-3 drafts, serve them with vLLM, measure and gate acceptance.")
verifier_app = typer.Typer(no_args_is_help=True, help="Verifier checkpoints: stand-ins, layout, agreement.")
recipe_app = typer.Typer(no_args_is_help=True, help="Recipes.")
app.add_typer(verifier_app, name="verifier")
app.add_typer(recipe_app, name="recipe")

RecipeArg = Annotated[Path | None, typer.Argument(help="Recipe TOML (default: train/tiny-kimi.toml).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a recipe value: --set train.epochs=5 (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _stdout():
    from rich.console import Console

    return Console()


def main() -> None:
    """Entry point: run the app; a HarnessError becomes one clear line and its exit code."""
    try:
        app(standalone_mode=False)
    except HarnessError as e:
        _stderr().print(f"[bold red]error:[/] {e.message}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        _stderr().print("[yellow]interrupted[/]: finished work is kept; rerun the same command to resume")
        sys.exit(130)
    except (typer.Exit, SystemExit) as e:
        code = getattr(e, "exit_code", getattr(e, "code", 0))
        sys.exit(code or 0)
    except Exception as e:  # click usage errors and the like
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(2)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(130)
        raise


# ----------------------------------------------------------------------------- verifier


@verifier_app.command("make-standin")
def make_standin(
    out: Annotated[Path, typer.Argument(help="Folder to write the stand-in checkpoint into.")],
    arch: Annotated[str, typer.Option(help="kimi-k2.5 | deepseek-v3 | llama")] = "kimi-k2.5",
    num_layers: Annotated[int | None, typer.Option(help="Decoder layers (default per arch).")] = None,
    pretrain_steps: Annotated[int | None, typer.Option(help="Pretraining steps (default per arch).")] = None,
    rope: Annotated[str | None, typer.Option(help="yarn | default (default per arch).")] = None,
    json_out: JsonOpt = False,
):
    """Build a tiny, architecture-faithful verifier locally (no hub); cached per spec."""
    import shutil

    from harness.verifier.standins.build import ensure_standin
    from harness.verifier.standins.specs import spec_for

    spec = spec_for(arch, num_layers=num_layers, pretrain_steps=pretrain_steps, rope=rope)
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
    path: Annotated[Path, typer.Argument(help="Checkpoint folder.")],
    json_out: JsonOpt = False,
):
    """The loader's view of a checkpoint, from config.json and the index alone (no weights read)."""
    from harness.verifier.inspect_view import render_layout
    from harness.verifier.layout import resolve_layout

    layout = resolve_layout(path)
    if json_out:
        print(json.dumps(layout.to_dict(), indent=2))
    else:
        render_layout(layout, _stdout())


# ----------------------------------------------------------------------------- recipe


@recipe_app.command("show")
def recipe_show(recipe: RecipeArg = None, set_: SetOpt = None):
    """Print the resolved recipe (defaults + file + --set) as TOML-like JSON."""
    from harness.recipe import load_recipe

    r = load_recipe(recipe, set_ or [])
    print(json.dumps(r.model_dump(mode="json"), indent=2))


if __name__ == "__main__":
    main()

