"""The verifier a draft is trained for and served with: resolved once, from the recipe."""

from __future__ import annotations

from typing import cast

from harness.recipe import Recipe
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout, resolve_layout


def resolve_verifier(recipe: Recipe, reporter: Reporter | None = None) -> VerifierLayout:
    """The recipe's verifier: a checkpoint path, or the cached stand-in (built on first use)."""
    v = recipe.verifier
    if v.standin:
        from harness.verifier.standins.build import ensure_standin
        from harness.verifier.standins.specs import spec_for

        spec = spec_for(v.standin, **v.standin_overrides)
        path = ensure_standin(spec, log=(reporter.log if reporter else lambda s: None))
        return resolve_layout(path, cast("dict[str, str]", v.weight_keys) or None)
    # the recipe has exactly one of path and standin; weight_keys' role names are str keys
    return resolve_layout(cast(str, v.path), cast("dict[str, str]", v.weight_keys) or None)


def load_tokenizer(layout: VerifierLayout, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(layout.path, trust_remote_code=trust_remote_code)
