"""The package's imports flow one way, top to bottom, with no circle (docs/architecture.md).

Every module of `harness/` belongs to a layer; a module may import (at module level or inside a
function) only from its own layer or a lower one, and the module import graph has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "harness"

# Lowest first. A module's layer is the first prefix that matches its dotted name.
LAYERS: list[tuple[str, ...]] = [
    ("harness.paths", "harness.hardware", "harness.interrupts"),
    (
        "harness.errors",
        "harness.schema",
        "harness.schema_manifest",
        "harness.schema_baseline",
        "harness.schema_requests",
        "harness.jsonfiles",
        "harness.ui",
        "harness.provenance",
        "harness.prompts",
        "harness.benchfiles",
        "harness.suites",
        "harness.recipe",
        "harness.cluster",
    ),
    ("harness.engine", "harness.metrics", "harness.analysis", "harness.results"),
    ("harness.verifier",),
    ("harness.draft",),
    ("harness.train", "harness.bench"),
    ("harness.plan",),
    ("harness.main_job", "harness.rehearsal", "harness.soak", "harness.headroom", "harness.canary"),
    ("harness.cli", "harness.__main__", "harness"),
]
# A screen of code: at most this many statements, and this many lines as ruff formats them (its
# one-argument-per-line calls make line counts grow without adding logic, so statements lead).
MAX_FUNCTION_STATEMENTS = 45
MAX_FUNCTION_LINES = 90


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = list(p.relative_to(REPO_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def layer_of(module: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "harness"):
            return i
    if module == "harness":
        return len(LAYERS) - 1
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py")


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for n in names:
            # the longest known module the name refers to
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n and n != module and n.startswith("harness"):
                found.add(n)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) - {"harness"} for m, p in mods.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})"
        for m, deps in graph.items()
        for d in deps
        if layer_of(d) > layer_of(m)
    )


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state and (cycle := visit(d)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_no_module_imports_from_a_layer_above_it():
    upward = upward_imports(import_graph())
    assert not upward, "imports against the flow:\n" + "\n".join(upward)


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checkers_see_a_planted_upward_import_and_cycle():
    """The two checks above must be able to fail."""
    graph = {"harness.paths": {"harness.cli"}, "harness.cli": {"harness.main_job"}, "harness.main_job": {"harness.cli"}}
    assert upward_imports(graph) == [
        "harness.main_job (layer 7) imports harness.cli (layer 8)",
        "harness.paths (layer 0) imports harness.cli (layer 8)",
    ]
    assert find_cycle(graph) == ["harness.cli", "harness.main_job", "harness.cli"]
    assert find_cycle({"harness.cli": {"harness.paths"}, "harness.paths": set()}) is None


def test_no_function_is_longer_than_a_screen():
    long = []
    for m, p in _modules().items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                stmts = sum(isinstance(x, ast.stmt) for x in ast.walk(node)) - 1
                if n > MAX_FUNCTION_LINES or stmts > MAX_FUNCTION_STATEMENTS:
                    long.append(f"{m}.{node.name}: {n} lines, {stmts} statements")
    assert not long, (
        f"functions over {MAX_FUNCTION_STATEMENTS} statements or {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)
    )
