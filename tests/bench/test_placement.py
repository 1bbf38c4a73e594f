"""Spreading the bench over nodes: whole baseline groups per node, balanced, the same on every node;
the dry run's per-node share and the wall time it saves."""

from __future__ import annotations

from harness.bench.grid import CellSpec
from harness.bench.placement import baseline_key, decode_weight, place
from harness.paths import REPO_ROOT
from harness.plan.dry_run import dry_run_plan
from harness.recipe import load_recipe

KIMI = REPO_ROOT / "train" / "kimi-k2.5.toml"


def _cells() -> list[CellSpec]:
    return [
        CellSpec(d, s, k, c, t)
        for d in ("draft", "ngram")
        for s in ("chat", "code", "math")
        for k in (3, 8)
        for c in (1, 8)
        for t in (0.0, 1.0)
    ]


def test_cells_sharing_a_baseline_stay_on_one_node():
    cells = _cells()
    placed = place(cells, 2, lambda c: 1.0)
    by_key: dict = {}
    for c in cells:
        by_key.setdefault(baseline_key(c), set()).add(placed[c])
    assert all(len(nodes) == 1 for nodes in by_key.values())
    assert set(placed.values()) == {0, 1}


def test_shares_balance_decode_time_and_do_not_depend_on_order():
    cells = _cells()
    weight = decode_weight(lambda c: 16 if c.concurrency == 1 else 80, None)
    placed = place(cells, 2, weight)
    load = [sum(weight(c) for c in cells if placed[c] == i) for i in (0, 1)]
    assert abs(load[0] - load[1]) <= max(weight(c) for c in cells) * 4  # within one group (4 cells: 2 drafts x 2 ks)
    assert place(list(reversed(cells)), 2, weight) == placed  # every node computes the same placement
    assert set(place(cells, 1, weight).values()) == {0}


def test_dry_run_spreads_the_bench_over_two_nodes_and_says_what_it_saves(tmp_path):
    plan = dry_run_plan(load_recipe(KIMI, ["cluster.nodes=2"]), tmp_path / "run" / "train", include_bench=True)
    nodes = plan["nodes"]
    shares = nodes["bench"]["nodes"]
    assert [n["node"] for n in shares] == [0, 1] and sum(n["cells"] for n in shares) == plan["bench"]["cells"]
    assert all(n["engine_starts"] == plan["bench"]["engines"] for n in shares)  # each node starts its engines
    assert 0 < nodes["hours_saved"] < nodes["bench"]["hours_on_one_node"]
    assert nodes["plan_hours_spread"] == round(nodes["plan_hours_one_node"] - nodes["hours_saved"], 2)
    assert [c.rsplit(" ", 1)[-1] for c in nodes["bench_commands"][:2]] == ["0/2", "1/2"]
    assert plan["checks"]["ok"]
    assert "nodes" not in dry_run_plan(load_recipe(KIMI, []), tmp_path / "one" / "train", include_bench=True)
