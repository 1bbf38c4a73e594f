"""Every third-party package the harness imports is declared in pyproject.toml (a fresh install of
the package alone, outside this repository's lock, must not miss one)."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib

from harness.paths import REPO_ROOT


def _imported_top_level() -> set[str]:
    mods: set[str] = set()
    for path in (REPO_ROOT / "harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
    return mods - set(sys.stdlib_module_names) - {"harness"}


def _declared() -> set[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower().replace("_", "-") for r in reqs}


def test_every_imported_package_is_declared():
    by_module = md.packages_distributions()
    declared = _declared()
    missing = {}
    for module in sorted(_imported_top_level()):
        dists = {d.lower().replace("_", "-") for d in by_module.get(module, [module])}
        if not dists & declared:
            missing[module] = sorted(dists)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_check_sees_an_undeclared_import():
    assert "psutil" in _imported_top_level() and "psutil" in _declared()
    assert not {"no-such-distribution"} & _declared()
