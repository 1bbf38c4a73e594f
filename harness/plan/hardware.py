"""The plan against the hardware it names ([cluster], harness/cluster.py): the failures the dry run
can predict, and the GPU memory budget of online training.

A predicted failure is one the real run would meet on that hardware (an engine that cannot start,
a process that runs out of memory, a disk that fills). The dry run exits 2 on any of them unless
the user accepts it by name (`--allow NAME`): a plan that says "no problems" has none it knows of.
Pure: the recipe and the plan's own estimates in, failures and budgets out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.cluster import (
    engine_schedule,
    engines_fit_side_by_side,
    extraction_engine,
    gpu_memory_gib,
    gpus_per_node,
    instance_gpus,
)
from harness.recipe import Recipe

# What a GPU process holds beyond its own tensors: CUDA context, NCCL buffers, allocator slack.
# An assumption (about 1-2 GiB of context plus fragmentation), not a measured figure.
PROCESS_OVERHEAD_GIB = 4.0
# What an extraction server needs beyond the verifier's weights: KV cache for its prefills,
# activations and (without enforce_eager) CUDA graphs, as a share of the GPU. An assumption.
SERVER_WORKSPACE_SHARE = 0.10

# The names a user may accept a predicted failure by (--allow NAME), with what each predicts.
NAMES = {
    "serving-gpus": "a serving instance needs more GPUs than a node (or the cluster) has",
    "training-gpus": "training asks for more processes or nodes than the cluster has",
    "bench-engines": "the bench keeps two engines up where one node holds one",
    "extraction-memory": "the extraction server's memory fraction does not hold the verifier's weights",
    "training-memory": "training runs out of GPU memory (beside the extraction server when online)",
    "disk": "the run's files do not fit cluster.disk_gib",
}


@dataclass(frozen=True)
class PredictedFailure:
    name: str  # a NAMES key
    message: str  # what fails, with the values, and the setting that fixes it

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "message": self.message}


def gpu_budget(recipe: Recipe, memory: dict[str, Any]) -> dict[str, Any] | None:
    """Online training on GPUs: one GPU's memory split between the extraction server (its fraction:
    weights and workspace) and a training process. None off the GPU or in offline mode."""
    e, t = recipe.engine, recipe.train
    mem, need = gpu_memory_gib(recipe), memory.get("training_gpu_gib_per_process")
    if e.device != "cuda" or t.hidden_states_mode != "online" or mem is None or need is None:
        return None
    frac = extraction_engine(recipe).gpu_memory_utilization or 0.9  # vLLM's default
    weights = memory.get("verifier_weights_gib_per_gpu")
    server = frac * mem
    training = need + PROCESS_OVERHEAD_GIB
    return {
        "gpu_memory_gib": mem,
        "extraction_fraction": frac,
        "extraction_gib": round(server, 1),
        "of_which_verifier_weights_gib": weights,
        "of_which_kv_activations_gib": None if weights is None else round(server - weights, 1),
        "training_gib_per_process": need,
        "process_overhead_gib": PROCESS_OVERHEAD_GIB,
        "left_gib": round(mem - server - training, 1),
        "fractions_that_fit": _fitting_fractions(mem, weights, training),
    }


def _fitting_fractions(mem: float, weights: float | None, training: float) -> list[float] | None:
    """[lowest, highest] extraction fraction that holds the weights and workspace and leaves training
    its memory; None when none does."""
    low = ((weights or 0.0) + SERVER_WORKSPACE_SHARE * mem) / mem
    high = (mem - training) / mem
    return [round(low + 0.005, 2), round(high - 0.005, 2)] if low < high else None


def _memory_failures(recipe: Recipe, memory: dict[str, Any]) -> list[PredictedFailure]:
    budget = gpu_budget(recipe, memory)
    if budget is None:
        mem, need = gpu_memory_gib(recipe), memory.get("training_gpu_gib_per_process")
        if recipe.engine.device == "cuda" and mem and need and need + PROCESS_OVERHEAD_GIB > mem:
            return [
                PredictedFailure(
                    "training-memory",
                    f"training needs ~{need} GiB per process (+{PROCESS_OVERHEAD_GIB:g} overhead), more than "
                    f"one {mem:g} GiB GPU: shard it (train.fsdp = true, more train.nproc_per_node) or shrink the draft",
                )
            ]
        return []
    frac, fits = budget["extraction_fraction"], budget["fractions_that_fit"]
    fix = (
        f"set train.extraction_gpu_memory_utilization between {fits[0]} and {fits[1]}"
        if fits
        else "no fraction leaves both enough: train offline (train.hidden_states_mode = 'offline') or on other GPUs"
    )
    out = []
    if budget["left_gib"] < 0:
        out.append(
            PredictedFailure(
                "training-memory",
                f"online training shares each {budget['gpu_memory_gib']:g} GiB GPU with the extraction server, "
                f"which takes {frac} of it ({budget['extraction_gib']} GiB): training needs "
                f"~{budget['training_gib_per_process']} GiB per process + {PROCESS_OVERHEAD_GIB:g} overhead, "
                f"{-budget['left_gib']} GiB short; {fix}",
            )
        )
    kv = budget["of_which_kv_activations_gib"]
    if kv is not None and kv < SERVER_WORKSPACE_SHARE * budget["gpu_memory_gib"]:
        out.append(
            PredictedFailure(
                "extraction-memory",
                f"the extraction server's {frac} of a GPU ({budget['extraction_gib']} GiB) leaves {kv} GiB beside "
                f"the verifier's weights ({budget['of_which_verifier_weights_gib']} GiB per GPU) for KV cache and "
                f"activations, under the {SERVER_WORKSPACE_SHARE:.0%} it needs; {fix}",
            )
        )
    return out


def _gpu_count_failures(recipe: Recipe, include_bench: bool) -> list[PredictedFailure]:
    e, t, c = recipe.engine, recipe.train, recipe.cluster
    if e.device != "cuda":
        return []
    node, instance, out = gpus_per_node(recipe), instance_gpus(e), []
    if e.tensor_parallel_size > node or instance > node * c.nodes:
        out.append(
            PredictedFailure(
                "serving-gpus",
                f"a serving instance takes {instance} GPUs (tensor {e.tensor_parallel_size} x pipeline "
                f"{e.pipeline_parallel_size}); the cluster has {c.nodes} node(s) of {node}: tensor parallelism stays "
                "within a node; lower engine.tensor_parallel_size or raise cluster.nodes / cluster.gpus_per_node",
            )
        )
    if t.launcher == "torchrun" and (t.nproc_per_node > node or t.nnodes > c.nodes):
        out.append(
            PredictedFailure(
                "training-gpus",
                f"training starts {t.nproc_per_node} process(es) on each of {t.nnodes} node(s); the cluster has "
                f"{c.nodes} node(s) of {node} GPUs: lower train.nproc_per_node / train.nnodes",
            )
        )
    if include_bench and engine_schedule(recipe) == "side_by_side" and not engines_fit_side_by_side(recipe):
        out.append(
            PredictedFailure(
                "bench-engines",
                f"bench.engine_schedule 'side_by_side' keeps the no-speculation engine up beside each speculative "
                f"engine: 2 x {instance} GPUs on the node the harness runs on, which has {node}; the speculative "
                "engine would fail to start. Set bench.engine_schedule = 'auto' (one engine at a time here)",
            )
        )
    return out


def _disk_failures(recipe: Recipe, disk_gib: float | None) -> list[PredictedFailure]:
    have = recipe.cluster.disk_gib
    if have is None or disk_gib is None or disk_gib <= have:
        return []
    return [
        PredictedFailure(
            "disk",
            f"the run's hidden states need ~{disk_gib:,.1f} GiB on disk, cluster.disk_gib is {have:g}: use "
            "train.hidden_states_mode = 'online', or a run folder (--run-dir) on a larger disk",
        )
    ]


def predicted_failures(
    recipe: Recipe, memory: dict[str, Any], disk_gib: float | None, include_bench: bool
) -> list[PredictedFailure]:
    """Every failure the plan predicts on the recipe's [cluster]: GPU counts, memory, disk."""
    return (
        _gpu_count_failures(recipe, include_bench) + _memory_failures(recipe, memory) + _disk_failures(recipe, disk_gib)
    )


def unknown_allowances(allow: list[str]) -> list[str]:
    """Names given to --allow that name no predicted failure (a typo would accept nothing)."""
    return [a for a in allow if a not in NAMES]
