"""One job per module (issue 55): no module under harness/ is over 600 lines, except the recipe
schema (harness/recipe.py: one pydantic model per recipe section, each field with its description)."""

from pathlib import Path

import harness

MAX_LINES = 600
EXEMPT = {"recipe.py"}


def test_no_module_under_harness_is_over_600_lines():
    root = Path(harness.__file__).parent
    over = {
        str(p.relative_to(root)): n
        for p in root.rglob("*.py")
        if str(p.relative_to(root)) not in EXEMPT and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not over, f"split these by job (lines): {over}"
