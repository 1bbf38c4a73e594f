"""The dynamic-k arm planned after the fixed ks, and its schedule derived from their rows
(harness/bench/dynamic.py); on a real engine: tests/e2e/test_dynamic_engine.py."""

from __future__ import annotations

from harness.schema import CellRow


def test_dynamic_arm_is_planned_after_the_fixed_ks_and_its_schedule_derived():
    from harness.bench.dynamic import derive_schedule
    from harness.bench.planning import plan_cells
    from harness.draft.under_test import DraftUnderTest
    from harness.recipe import load_recipe
    from harness.suites import load_suite

    recipe = load_recipe(
        None,
        [
            "bench.suites=['code']",
            "bench.k=[1,3]",
            "bench.concurrency=[1,4]",
            "bench.temperature=[0.0]",
            "bench.dynamic_k=true",
            "bench.reference_drafts=[]",
        ],
    )
    cells = plan_cells(recipe, [DraftUnderTest("d", "eagle3", None, "/x")], [load_suite("code", 2, {})])
    assert [(c.draft, c.k, c.concurrency) for c in cells[-2:]] == [("d-dynamic", 3, 1), ("d-dynamic", 3, 4)]
    rows = [
        CellRow.from_dict({"draft": "d", "mode": m, "k": k, "concurrency": c, "output_tok_per_s": v})
        for m, k, c, v in (
            ("baseline", 1, 1, 100),
            ("speculative", 1, 1, 150),
            ("baseline", 3, 1, 100),
            ("speculative", 3, 1, 180),
            ("baseline", 1, 4, 300),
            ("speculative", 1, 4, 310),
            ("baseline", 3, 4, 300),
            ("speculative", 3, 4, 250),
        )
    ]
    assert derive_schedule(rows, "d") == ((1, 2, 3), (3, 4, 1))
    assert derive_schedule(rows, "other") is None
