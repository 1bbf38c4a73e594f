"""The tests mirror the code (issue 55, tests/README.md): every module of harness/ with logic (a function
or a method) has tests/<package>/test_<module>.py, or one line of tests/README.md naming it and where it
is tested; a line names a module that exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.paths import REPO_ROOT

HARNESS = REPO_ROOT / "harness"
TESTS = REPO_ROOT / "tests"

# a README line that accounts for a module: "- `harness/<path>.py`: where it is tested"
_LINE = re.compile(r"^- `(harness/[\w/]+\.py)`", re.MULTILINE)


def has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree))


def mirror(module: Path, harness: Path, tests: Path) -> Path:
    """harness/a/b.py -> tests/a/test_b.py; harness/b.py -> tests/test_b.py."""
    rel = module.relative_to(harness)
    return tests / rel.parent / f"test_{rel.name}"


def named_in_readme(readme: str) -> set[str]:
    return set(_LINE.findall(readme))


def unaccounted(harness: Path, tests: Path, readme: str) -> list[str]:
    """Modules with logic that have neither a mirror test file nor a README line."""
    named = named_in_readme(readme)
    out = []
    for module in sorted(harness.rglob("*.py")):
        name = f"harness/{module.relative_to(harness).as_posix()}"
        if has_logic(module) and not mirror(module, harness, tests).is_file() and name not in named:
            out.append(name)
    return out


def test_every_module_with_logic_has_a_mirror_test_or_a_readme_line():
    missing = unaccounted(HARNESS, TESTS, (TESTS / "README.md").read_text())
    assert missing == [], (
        "no tests/<package>/test_<module>.py and no line in tests/README.md for: "
        + ", ".join(missing)
        + " (add the test file, or a line '- `harness/...py`: where it is tested')"
    )


def test_every_module_and_test_file_the_readme_names_exists():
    readme = (TESTS / "README.md").read_text()
    named = named_in_readme(readme)
    assert named, "tests/README.md names no module: the line format changed?"
    assert sorted(n for n in named if not (REPO_ROOT / n).is_file()) == []
    files = set(re.findall(r"\btests/[\w/]+\.py\b", readme))
    assert sorted(f for f in files if not (REPO_ROOT / f).is_file()) == []


def test_the_check_sees_an_untested_module_and_a_readme_line_clears_it(tmp_path):
    harness, tests = tmp_path / "harness", tmp_path / "tests"
    (harness / "pkg").mkdir(parents=True)
    (tests / "pkg").mkdir(parents=True)
    (harness / "pkg" / "logic.py").write_text("def f():\n    return 1\n")
    (harness / "pkg" / "method.py").write_text("class C:\n    def m(self):\n        return 1\n")
    (harness / "pkg" / "data.py").write_text("X = 1\n\n\nclass D:\n    y: int = 2\n")
    (harness / "top.py").write_text("def g():\n    return 2\n")
    assert unaccounted(harness, tests, "") == ["harness/pkg/logic.py", "harness/pkg/method.py", "harness/top.py"]
    (tests / "pkg" / "test_logic.py").write_text("")
    (tests / "test_top.py").write_text("")
    assert unaccounted(harness, tests, "") == ["harness/pkg/method.py"]
    assert unaccounted(harness, tests, "- `harness/pkg/method.py`: tests/pkg/test_logic.py\n") == []
    assert unaccounted(harness, tests, "see `harness/pkg/method.py` somewhere\n") == ["harness/pkg/method.py"]
