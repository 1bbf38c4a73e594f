"""The plan over several nodes ([cluster] nodes > 1): where each stage runs and the wall time that saves.

The bench spreads: each node measures a share of the cells (harness/bench/placement.py: whole
baseline groups, balanced by decode time) with every engine configuration its cells need, as
`harness bench --shard I/N`, and the shards merge into one run folder. The training stages stay on
the nodes the recipe gives them (responses and extraction on one serving instance; training on
train.nnodes). GPU-hours grow by the engine starts each node repeats; wall time falls. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.plan.cost import stage_costs
from harness.plan.figures import Figure, by_key, figures_from
from harness.plan.stages import bench_count, bench_work, serving_gpus
from harness.recipe import Recipe


def bench_spread(
    recipe: Recipe, suite_requests: Sequence[tuple[str, int | None]], figures: Sequence[Figure]
) -> dict[str, Any] | None:
    """Per node: its cells, engine starts, hours and GPU-hours; the bench's wall on one node and spread."""
    nodes = recipe.cluster.nodes
    if nodes < 2:
        return None
    figs, gpus = by_key(figures), serving_gpus(recipe.engine)
    [one] = stage_costs([bench_work(recipe, bench_count(recipe, suite_requests), gpus)], figs)
    per_node = []
    for i in range(nodes):
        count = bench_count(recipe, suite_requests, node=(i, nodes))
        [cost] = stage_costs([bench_work(recipe, count, gpus)], figs)
        per_node.append(
            {
                "node": i,
                "cells": count.cells,
                "engine_starts": count.engines,
                "hours": None if cost.wall_h is None else round(cost.wall_h, 2),
                "gpu_h": None if cost.gpu_h is None else round(cost.gpu_h, 1),
            }
        )
    walls = [n["hours"] for n in per_node if n["hours"] is not None]
    spread_h = max(walls) if len(walls) == nodes else None
    one_h = one.wall_h
    return {
        "nodes": per_node,
        "hours_on_one_node": None if one_h is None else round(one_h, 2),
        "hours_spread": spread_h,
        "hours_saved": None if one_h is None or spread_h is None else round(one_h - spread_h, 2),
        "gpu_h_spread": round(sum(n["gpu_h"] or 0.0 for n in per_node), 1),
        "gpu_h_on_one_node": None if one.gpu_h is None else round(one.gpu_h, 1),
    }


def spread_section(
    recipe: Recipe, plan: dict[str, Any], suite_requests: Sequence[tuple[str, int | None]] | None, run_id: str
) -> dict[str, Any] | None:
    """The dry run's `nodes` section: each stage's nodes, the bench's per-node share and commands, and
    the plan's wall time on one node and spread."""
    if recipe.cluster.nodes < 2 or suite_requests is None:
        return None
    bench = bench_spread(recipe, suite_requests, figures_from(plan["cost"]))
    if bench is None:
        return None
    total_h = plan["cost"]["total"]["wall_h"]
    nodes = recipe.cluster.nodes
    # RECIPE: the recipe file with the same --set values; each command on its own node, e.g. by srun
    cmd = "harness bench RECIPE --draft {run}/train/draft --run-id {id} --shard {i}/{n}"
    return {
        "stages": {
            "responses": "node 0 (one serving instance)",
            "hidden states": "node 0 (one extraction instance)",
            "training": f"{recipe.train.nnodes} node(s) (train.nnodes)",
            "bench": f"all {nodes} nodes: each measures its share of the cells (harness/bench/placement.py)",
        },
        "bench": bench,
        "bench_commands": [cmd.format(run="results/runs/" + run_id, id=run_id, i=i, n=nodes) for i in range(nodes)]
        + [f"harness bench --merge {run_id}"],
        "plan_hours_one_node": total_h,
        "plan_hours_spread": None if bench["hours_saved"] is None else round(total_h - bench["hours_saved"], 2),
        "hours_saved": bench["hours_saved"],
    }
