"""The training run folder: made by one recipe (its fingerprint over TRAIN_SECTIONS), refused to any
other, so results of two recipes never mix; and the JSONL files its stages write (harness/train/pipeline.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.provenance import atomic_write_json
from harness.recipe import Recipe

TRAIN_SECTIONS = ("verifier", "engine", "draft", "train")


def prepare_run_dir(run_dir: Path, recipe: Recipe, sections: tuple[str, ...]) -> None:
    """Create the folder or check it was made by the same recipe (refuse to mix)."""
    marker = run_dir / "recipe.json"
    fp = recipe.fingerprint(*sections)
    if marker.is_file():
        old = json.loads(marker.read_text())
        if old.get("fingerprint") != fp and _same_with_new_defaults(old.get("recipe", {}), fp, sections):
            # made before a setting was added: the same recipe once the new setting's default is filled in
            atomic_write_json(marker, {**old, "fingerprint": fp, "recipe": recipe.model_dump(mode="json")})
            return
        if old.get("fingerprint") != fp:
            theirs = old.get("recipe", {})
            mine = recipe.model_dump(mode="json")
            diff = sorted(
                f"{s}.{k}"
                for s in sections
                for k in set(theirs.get(s, {})) | set(mine.get(s, {}))
                if theirs.get(s, {}).get(k) != mine.get(s, {}).get(k)
            )
            raise BadInput(
                f"{run_dir} was made by a different recipe (differs in {', '.join(diff[:6]) or 'content'}); "
                "use another --out folder, or delete this one to start over"
            )
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        raise BadInput(f"{run_dir} exists and was not made by harness train; use another --out folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(marker, {"fingerprint": fp, "sections": list(sections), "recipe": recipe.model_dump(mode="json")})


def _same_with_new_defaults(old_recipe: dict[str, Any], fp: str, sections: tuple[str, ...]) -> bool:
    """Whether a run folder's recorded recipe, read by this version (settings added since take
    their defaults), has fingerprint `fp`."""
    from pydantic import ValidationError

    try:
        return Recipe.model_validate(old_recipe).fingerprint(*sections) == fp
    except (ValidationError, TypeError, ValueError):
        return False


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
