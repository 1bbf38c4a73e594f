"""What the command modules share: the recipe/--set/--json options, the two consoles, the progress display."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

RecipeArg = Annotated[Path | None, typer.Argument(help="Recipe TOML (default: train/tiny-kimi.toml).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a recipe value: --set train.epochs=5 (repeatable).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def stderr():
    from harness.ui import stderr_console

    return stderr_console()


def stdout():
    from harness.ui import stdout_console

    return stdout_console()


@contextlib.contextmanager
def progress():
    """One rich progress display on stderr for the command's stages, always closed."""
    from harness.ui import RichReporter

    rep = RichReporter()
    try:
        yield rep
    finally:
        rep.close()
