"""The verifier a draft is trained for and served with: resolved once, from the recipe."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from harness.recipe import Recipe
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout, resolve_layout


def resolve_verifier(recipe: Recipe, reporter: Reporter | None = None) -> VerifierLayout:
    """The recipe's verifier: a checkpoint path, or the cached stand-in or pretrained model (built on
    first use)."""
    v = recipe.verifier
    log = reporter.log if reporter else lambda s: None
    path: str | Path
    if v.pretrained:
        from harness.verifier.pretrained import ensure_pretrained

        path = ensure_pretrained(v.pretrained, log=log)
    elif v.standin:
        from harness.verifier.standins.build import ensure_standin
        from harness.verifier.standins.specs import spec_for

        path = ensure_standin(spec_for(v.standin, **v.standin_overrides), log=log)
    else:  # the recipe has exactly one of path, standin and pretrained
        path = cast(str, v.path)
    # weight_keys' role names are str keys
    return resolve_layout(path, cast("dict[str, str]", v.weight_keys) or None)


def load_tokenizer(layout: VerifierLayout, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(layout.path, trust_remote_code=trust_remote_code)
