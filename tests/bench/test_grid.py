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
    aliases = suite_aliases(b.suites, [[s] for s in b.suites], names, b.suite_variants, True)
    assert aliases["math"] == ["math@think", "math@nothink"] and aliases["code@think"] == ["code@think"]
    extra = [c for c in plan_grid(b, ["draft"], names, aliases) if c.concurrency == 1]
    assert [c.suite for c in extra] == ["math@think", "math@nothink"]


def test_prefix_caching_modes_make_nocache_twins_that_an_extra_cell_names_by_the_suite():
    """bench.prefix_caching = [true, false] with thinking modes: each suite four times, caching on
    under the thinking name and off as `@nocache` (the same records, a fresh cache salt per
    request); an extra cell naming the suite runs on all four."""
    from harness.bench.planning import recipe_suites
    from harness.recipe import load_recipe
    from tests.conftest import PLAIN_RECIPE

    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "bench.suites=['chat','math']",
            "bench.thinking=[true,false]",
            "bench.prefix_caching=[true,false]",
            "bench.num_prompts=2",
            "bench.extra_cells=[{suite='math', k=3, concurrency=1, temperature=0.0}]",
        ],
    )
    suites = recipe_suites(recipe)
    names = [s.name for s in suites]
    assert names == [
        "chat@think", "chat@think@nocache", "chat@nothink", "chat@nothink@nocache",
        "math@think", "math@think@nocache", "math@nothink", "math@nothink@nocache",
    ]  # fmt: skip
    assert [s.prefix_caching for s in suites[:2]] == [True, False]
    assert suites[0].records == suites[1].records and suites[0].sha == suites[1].sha
    from harness.bench.grid import recipe_suite_aliases

    aliases = recipe_suite_aliases(recipe.bench, names)
    assert aliases["math"] == names[4:] and aliases["chat@think@nocache"] == ["chat@think@nocache"]
    extra = [c for c in plan_grid(recipe.bench, ["draft"], names, aliases) if c.concurrency == 1]
    assert [c.suite for c in extra] == names[4:]


def test_a_by_category_spec_names_every_category_and_each_category_itself():
    specs = ["bench.jsonl#by-category"]
    parts = [["bench.jsonl#category=coding", "bench.jsonl#category=math"]]
    aliases = suite_aliases(specs, parts, ["sb-coding", "sb-math"], 1, False)
    assert aliases["bench.jsonl#by-category"] == ["sb-coding", "sb-math"]
    assert aliases["bench.jsonl#category=math"] == ["sb-math"] and aliases["sb-coding"] == ["sb-coding"]


def test_grid_then_extra_cells_then_dynamic_arm_with_no_duplicate():
    b = _bench(
        "bench.suites=['code']",
        "bench.k=[1,3]",
        "bench.dynamic_k=true",
        "bench.extra_cells=[{suite='code', k=3, concurrency=4, temperature=0.0}]",  # already in the grid
    )
    cells = plan_grid(b, ["d"], ["code"], suite_aliases(b.suites, [["code"]], ["code"], 1, False))
    assert [(c.draft, c.k) for c in cells] == [("d", 1), ("d", 3), ("d-dynamic", 3)]
