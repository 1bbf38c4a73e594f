"""What the dry run's sections share: the engine plans as the real run builds them (naming the
recipe's checkpoint path even when the structure checked is the bundled one), the part of an engine
plan a run records, and the verifier's weights on disk.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.engine.settings import SpeculativeSpec, engine_plan
from harness.recipe import Recipe
from harness.verifier.layout import VerifierLayout

GIB = 1024**3


@dataclasses.dataclass(frozen=True)
class Commands:
    """Engine plans as the real run builds them, naming the recipe's checkpoint path even when
    the dry run checks the bundled structure."""

    recipe: Recipe
    layout: VerifierLayout
    python: str

    def engine(self, spec: SpeculativeSpec | None = None):
        model = self.recipe.verifier.path or self.layout.path
        # problems are listed by dry_run._structure_problems, not raised one at a time here
        return dataclasses.replace(engine_plan(self.recipe.engine, self.layout, spec, refuse=False), model=model)


def engine_record(plan) -> dict[str, Any]:
    """The part of an engine plan a run records and the dry run prints: model, arguments, environment."""
    return {
        "model": plan.model,
        "engine_kwargs": plan.engine_kwargs,
        "env": plan.env,
        "workarounds": list(plan.workarounds),
    }


def verifier_weights_gib(layout: VerifierLayout) -> float | None:
    import json

    index = Path(layout.path) / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if total:
            return round(total / GIB, 1)
    return None
