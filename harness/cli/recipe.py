"""`harness recipe ...`: the resolved recipe."""

from __future__ import annotations

import json

import typer

from harness.cli.common import RecipeArg, SetOpt

recipe_app = typer.Typer(no_args_is_help=True, help="Recipes.")


@recipe_app.command("show")
def recipe_show(recipe: RecipeArg = None, set_: SetOpt = None):
    """Print the resolved recipe (defaults + file + --set) as TOML-like JSON."""
    from harness.recipe import load_recipe

    r = load_recipe(recipe, set_ or [])
    print(json.dumps(r.model_dump(mode="json"), indent=2))
