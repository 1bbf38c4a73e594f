"""The cell planner the bench and the dry run's cost model share (harness/bench/grid.py)."""

from __future__ import annotations

from harness.bench.grid import plan_grid, suite_aliases
from harness.recipe import load_recipe


def _bench(*sets: str):
    return load_recipe(None, ["bench.k=[3]", "bench.concurrency=[4]", "bench.temperature=[0.0]", *sets]).bench


def test_an_extra_cell_on_a_spec_runs_on_each_of_its_thinking_modes_only():
    """Suites load as [a@think, a@nothink, b@think, b@nothink]: an extra cell naming `b` by its spec
    or by its name before the mode runs on b's two suites, never on a's."""
    b = _bench(
        "bench.suites=['code','math']",
        "bench.thinking=[true,false]",
        "bench.extra_cells=[{suite='math', k=3, concurrency=1, temperature=0.0}]",
    )
    names = ["code@think", "code@nothink", "math@think", "math@nothink"]
    aliases = suite_aliases(b.suites, [[s] for s in b.suites], names, len(b.thinking))
    assert aliases["math"] == ["math@think", "math@nothink"] and aliases["code@think"] == ["code@think"]
    extra = [c for c in plan_grid(b, ["draft"], names, aliases) if c.concurrency == 1]
    assert [c.suite for c in extra] == ["math@think", "math@nothink"]


def test_a_by_category_spec_names_every_category_and_each_category_itself():
    specs = ["bench.jsonl#by-category"]
    parts = [["bench.jsonl#category=coding", "bench.jsonl#category=math"]]
    aliases = suite_aliases(specs, parts, ["sb-coding", "sb-math"], 0)
    assert aliases["bench.jsonl#by-category"] == ["sb-coding", "sb-math"]
    assert aliases["bench.jsonl#category=math"] == ["sb-math"] and aliases["sb-coding"] == ["sb-coding"]


def test_grid_then_extra_cells_then_dynamic_arm_with_no_duplicate():
    b = _bench(
        "bench.suites=['code']",
        "bench.k=[1,3]",
        "bench.dynamic_k=true",
        "bench.extra_cells=[{suite='code', k=3, concurrency=4, temperature=0.0}]",  # already in the grid
    )
    cells = plan_grid(b, ["d"], ["code"], suite_aliases(b.suites, [["code"]], ["code"], 0))
    assert [(c.draft, c.k) for c in cells] == [("d", 1), ("d", 3), ("d-dynamic", 3)]
