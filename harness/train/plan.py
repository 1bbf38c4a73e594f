"""`--dry-run`: resolve the whole plan — commands, configs, parallelism, disk, memory — and
validate it against the verifier's real structure, without weights, GPUs or network.

Without the checkpoint on this machine, a recipe naming `verifier.reference` is checked against
the bundled structure of that model (its real config.json and a full weight index).
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from harness.engine.settings import SpeculativeSpec, engine_plan, pipeline_refusals
from harness.errors import BadInput
from harness.recipe import Recipe
from harness.train.records import dflash_anchors
from harness.verifier.layout import VerifierLayout, resolve_layout

GIB = 1024**3


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


def _prompt_records(recipe: Recipe) -> list | None:
    """train.prompts as the real run reads them, follow-up turns included; None when only known at
    run time (a Hugging Face dataset, a file not there yet)."""
    from harness.prompts import load_jsonl
    from harness.train.conversations import with_follow_ups
    from harness.train.prompts import BUILTIN

    t = recipe.train
    if t.prompts == "builtin":
        records = load_jsonl(BUILTIN)
    elif t.prompts.startswith("hf:") or not Path(t.prompts).is_file():
        return None
    else:  # parsed as the real run parses it: a malformed line fails the dry run too
        records = load_jsonl(Path(t.prompts), t.prompt_field_map or None)
    records = records[: t.num_prompts] if t.num_prompts is not None else records
    return with_follow_ups(records, t.conversations, t.seed)


def _prompt_set_size(recipe: Recipe) -> int | None:
    """Prompts taken from train.prompts (the long documents not included)."""
    records = _prompt_records(recipe)
    return len(records) if records is not None else recipe.train.num_prompts


def _later_turns(recipe: Recipe) -> list[int]:
    """The turn number (1 = the second) of every later-turn request the responses stage will send:
    exact where the prompts are known, else train.conversations' second turns and half as many
    third (one or two follow-ups each, evenly)."""
    records = _prompt_records(recipe)
    if records is None:
        n = recipe.train.conversations
        return [1] * n + [2] * (n // 2)
    return [t for r in records if r.turns for t in range(1, len(r.turns))]


def _num_prompts(recipe: Recipe) -> int | None:
    """Requests the responses stage sends: prompts, long documents and the conversations' later turns."""
    n = _prompt_set_size(recipe)
    return n + recipe.train.long_documents + len(_later_turns(recipe)) if n is not None else None


def _long_document_tokens(recipe: Recipe) -> int:
    """The long-document prompts' tokens: their lengths are planned exactly (harness/train/long_documents.py)."""
    from harness.train.long_documents import target_lengths

    t = recipe.train
    return sum(target_lengths(t.long_documents, recipe.engine.max_model_len - t.max_new_tokens))


def _draft_params(cfg: dict[str, Any], draft_vocab: int, n_aux: int) -> int:
    h, heads, kv, hd, inter = (
        cfg["hidden_size"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
        cfg["intermediate_size"],
    )
    attn = 2 * h * heads * hd + 2 * 2 * h * kv * hd  # q from 2H (embeds + hidden), k/v from 2H, o
    mlp = 3 * h * inter
    return n_aux * h * h + cfg["num_hidden_layers"] * (attn + mlp) + draft_vocab * h


# speculators' P-EAGLE COD sampling defaults (PEagleDraftModel.get_trainer_kwargs): depth d keeps a
# share max(0.7**d, 0.2) of the positions
COD_RATIO, COD_RATIO_MIN = 0.7, 0.2


def positions_per_token(method: str, steps: int, total_seq_len: int = 0, max_anchors: int | None = None) -> float:
    """Draft positions computed per packed training token: EAGLE-3 runs its `steps` TTT forwards over
    the whole sequence; P-EAGLE one forward over its COD sample (depth 0 every position, depth d a
    share max(0.7^d, 0.2)); DFlash anchors x (steps + 1) block positions per batch, plus each token's
    context K/V, counted here as one more position (an upper bound: only K/V are projected for context)."""
    if method == "peagle":
        return 1 + sum(max(COD_RATIO**d, COD_RATIO_MIN) for d in range(1, steps))
    if method == "dflash":
        return 1 + dflash_anchors(max_anchors, total_seq_len, steps) * (steps + 1) / max(total_seq_len, 1)
    return float(steps)


def _structure_problems(recipe: Recipe, layout: VerifierLayout) -> list[str]:
    """What the real verifier's structure says against this recipe (same checks as a real run)."""
    from harness.draft.config import aux_layer_ids, check_draft_vocab

    e, problems = recipe.engine, []
    for check in (aux_layer_ids, check_draft_vocab):
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
    weights_gib = _weights_gib(layout)
    if e.device == "cuda" and weights_gib and weights_gib / (tp * pp) > 0.9 * 141:
        problems.append(f"verifier weights {weights_gib} GiB do not fit {tp * pp} x 141 GiB (H200)")
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


@dataclasses.dataclass(frozen=True)
class _Commands:
    """Engine plans as the real run builds them, naming the recipe's checkpoint path even when
    the dry run checks the bundled structure."""

    recipe: Recipe
    layout: VerifierLayout
    python: str

    def engine(self, spec: SpeculativeSpec | None = None):
        model = self.recipe.verifier.path or self.layout.path
        # problems are listed by _structure_problems, not raised one at a time here
        return dataclasses.replace(engine_plan(self.recipe.engine, self.layout, spec, refuse=False), model=model)


def _responses_section(recipe: Recipe, cmds: _Commands) -> dict[str, Any]:
    t, serve = recipe.train, cmds.engine()
    return {
        "engine_command": " ".join(serve.server_command(cmds.python, "127.0.0.1", 8000)),
        "env": serve.env,
        "workarounds": list(serve.workarounds),
        "num_prompts": _num_prompts(recipe),
        "later_turns": len(_later_turns(recipe)),
        "max_new_tokens": t.max_new_tokens,
        "concurrency": t.response_concurrency,
        "temperature": t.response_temperature,
    }


def _hidden_states_section(recipe: Recipe, cmds: _Commands, aux: list[int], run_dir: Path) -> dict[str, Any]:
    from harness.train.hidden_states import DTYPE_BYTES

    t, layout = recipe.train, cmds.layout
    short = _prompt_set_size(recipe) or 0
    # ~256 prompt tokens on average for the prompt set (an estimate); the long documents' exactly
    tokens = short * (t.max_new_tokens + 256) + t.long_documents * t.max_new_tokens + _long_document_tokens(recipe)
    # a later turn t holds the t turns before it, answers included, then its own
    tokens += sum((turn + 1) * (t.max_new_tokens + 256) for turn in _later_turns(recipe))
    bytes_per = DTYPE_BYTES[t.hidden_states_dtype]
    disk = tokens * (len(aux) + 1) * layout.hidden_size * bytes_per
    offline = {
        "disk_gib": round(disk / GIB, 1),
        "formula": f"tokens x (aux {len(aux)} + 1) x hidden {layout.hidden_size} x {bytes_per} B",
    }
    hs: dict[str, Any] = {
        "mode": t.hidden_states_mode,
        "source": t.hidden_states_source,
        "aux_layer_ids": aux,
        "plus": "pre-norm last hidden state",
        "dtype": t.hidden_states_dtype,
        "estimated_tokens": tokens,
        "disk_by_mode": {"offline": offline},
    }
    if t.hidden_states_source == "vllm":
        from harness.train.online import disk_bound
        from harness.train.vllm_states import extraction_plan

        ext = dataclasses.replace(
            extraction_plan(recipe.engine, layout, aux, run_dir / "hidden_raw"),
            model=recipe.verifier.path or layout.path,
        )
        bound, formula = disk_bound(recipe, layout, aux, ext)
        hs["disk_by_mode"]["online"] = {"disk_gib": round(bound / GIB, 2), "formula": formula}
        hs["extraction_command"] = " ".join(ext.server_command(cmds.python, "127.0.0.1", 8001))
        if ext.workarounds:
            hs["workarounds"] = list(ext.workarounds)
    else:
        hs["disk_by_mode"]["online"] = "needs train.hidden_states_source = 'vllm' (a live extraction server)"
    hs["estimated_disk_gib"] = (
        hs["disk_by_mode"]["online"]["disk_gib"] if t.hidden_states_mode == "online" else offline["disk_gib"]
    )
    return hs


def _draft_and_memory_sections(recipe: Recipe, layout: VerifierLayout, aux: list[int]) -> dict[str, Any]:
    from harness.draft.config import draft_layer_config

    e, t, d = recipe.engine, recipe.train, recipe.draft
    dcfg = draft_layer_config(recipe, layout, e.max_model_len)
    params = _draft_params(dcfg, d.draft_vocab_size, len(aux))
    embed = layout.vocab_size * layout.hidden_size
    # P-EAGLE trains its token embedding (the mask token's row is learned) and saves it with the draft
    lookups = embed + len(aux) * layout.hidden_size if d.method == "peagle" else 0  # + mask_hidden
    params += lookups
    # embed + verifier head (P-EAGLE's embed is counted in params instead)
    frozen = embed * (1 if d.method == "peagle" else 2) + d.draft_vocab_size * layout.hidden_size
    per_token = positions_per_token(d.method, t.ttt_steps, t.total_seq_len, t.max_anchors)
    positions = t.total_seq_len * per_token
    act = int(positions * (dcfg["intermediate_size"] * 3 + layout.hidden_size * 12) * 4)
    logits = int(positions * d.draft_vocab_size * 4 * 3)
    trainable = params * 16 / (t.nproc_per_node * t.nnodes) if t.fsdp and t.nproc_per_node > 1 else params * 16
    gpu_bytes = trainable + frozen * 2 + act + logits  # fp32 weights+grads+Adam(2) = 16 B/param
    weights_gib = _weights_gib(layout)
    gpus = e.tensor_parallel_size * e.pipeline_parallel_size
    return {
        "draft": {
            "layer_config": dcfg,
            "method": d.method,
            "trainable_params": params,
            # what a training token's FLOPs scale with (the cost model): matmul weights, draft positions
            "matmul_params": params - lookups,
            "positions_per_token": round(per_token, 3),
            "draft_vocab_size": d.draft_vocab_size,
            "aux_layer_ids": aux,
            "ttt_steps": t.ttt_steps,
        },
        "memory_estimates": {
            "training_gpu_gib_per_process": round(gpu_bytes / GIB, 1),
            "training_formula": (
                "trainable x 16 B (fp32 weights, grads, Adam) + frozen embed/head + activations + logits, "
                f"over {per_token:.2f} draft positions per packed token"
            ),
            "verifier_weights_gib": weights_gib,
            "verifier_weights_gib_per_gpu": round(weights_gib / gpus, 1) if weights_gib else None,
        },
    }


def _training_section(recipe: Recipe, run_dir: Path) -> dict[str, Any]:
    from harness.train.launch import torchrun_command

    t = recipe.train
    return {
        "launcher": t.launcher,
        "command": " ".join(torchrun_command(recipe, run_dir))
        if t.launcher == "torchrun"
        else f"{sys.executable} -m harness.train.fit {run_dir}  (in-process)",
        "epochs": t.epochs,
        "lr": t.lr,
        "total_seq_len": t.total_seq_len,
        "loss": recipe.train_loss,
        # DDP: every process packs its own total_seq_len batch, so a step sees world-size times that
        "tokens_per_optimizer_step": t.total_seq_len * t.nproc_per_node * t.nnodes,
        "trainer": "speculators.train.trainer.Trainer (DDP" + (" + FSDP" if t.fsdp else "") + ")",
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
    recipe: Recipe, cmds: _Commands, run_dir: Path, suite_requests: tuple[tuple[str, int | None], ...]
) -> dict[str, Any]:
    from harness.train.cost import bench_count

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
        # as harness/bench/run.py plans them: thinking modes, extra cells, dynamic k and reference drafts included
        "cells": count.cells,
        "engines": count.engines,
        "repeats": b.repeats,
        "engine": b.engine,
        "baseline_command": " ".join(cmds.engine().server_command(cmds.python, "127.0.0.1", 8000)),
        "speculative_command_example": " ".join(spec.server_command(cmds.python, "127.0.0.1", 8000)),
        # What the real run hands vLLM (and records in its manifest's `engines`), field for field.
        "baseline_engine": engine_record(cmds.engine()),
        "speculative_engine_example": engine_record(spec),
    }


def engine_record(plan) -> dict[str, Any]:
    """The part of an engine plan a run records and the dry run prints: model, arguments, environment."""
    return {
        "model": plan.model,
        "engine_kwargs": plan.engine_kwargs,
        "env": plan.env,
        "workarounds": list(plan.workarounds),
    }


def dry_run_plan(recipe: Recipe, run_dir: Path, include_bench: bool = False) -> dict[str, Any]:
    """Every command, config and estimate of a real run, checked against the verifier's structure."""
    layout, source = layout_for_plan(recipe)
    plan: dict[str, Any] = {"recipe": recipe.name, "verifier_source": source}
    problems = _structure_problems(recipe, layout)
    aux = list(recipe.draft.aux_layer_ids or layout.default_aux_layer_ids)
    cmds = _Commands(recipe, layout, "python" if recipe.engine.device == "cuda" else sys.executable)
    plan["verifier"] = _verifier_section(layout)
    plan["parallelism"] = _parallelism_section(recipe)
    plan["responses"] = _responses_section(recipe, cmds)
    plan["hidden_states"] = _hidden_states_section(recipe, cmds, aux, run_dir)
    plan.update(_draft_and_memory_sections(recipe, layout, aux))
    plan["training"] = _training_section(recipe, run_dir)
    # local suites parsed as the bench parses them (hf: datasets need the network)
    suite_requests = _suite_requests(recipe) if include_bench else None
    if suite_requests is not None:
        plan["bench"] = _bench_section(recipe, cmds, run_dir, suite_requests)
    plan["cost"] = _cost_section(recipe, layout, plan, suite_requests)
    warnings = _online_gpu_warnings(recipe, plan["memory_estimates"])
    if include_bench:
        warnings += _bench_gpu_warnings(recipe, plan["memory_estimates"].get("verifier_weights_gib"))
    plan["checks"] = {"problems": problems, "warnings": warnings, "ok": not problems}
    if problems:
        raise BadInput(
            f"dry run of {recipe.name}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return plan


def _cost_section(
    recipe: Recipe,
    layout: VerifierLayout,
    plan: dict[str, Any],
    suite_requests: tuple[tuple[str, int | None], ...] | None,
) -> dict[str, Any]:
    """The plan's work in hours and GPU-hours (harness/train/cost.py); the bench's only with the bench."""
    from harness.train.cost import PlanNumbers, active_params, default_figures, plan_cost, serving_gpus, with_recipe

    e, hs = recipe.engine, plan["hidden_states"]
    gpus = serving_gpus(e)
    numbers = PlanNumbers(
        num_prompts=plan["responses"]["num_prompts"],
        sample_tokens=hs["estimated_tokens"],
        serving_gpus=gpus,
        disk_gib={m: d["disk_gib"] if isinstance(d, dict) else None for m, d in hs["disk_by_mode"].items()},
        suite_requests=suite_requests,
    )
    defaults = default_figures(
        e.device,
        gpus,
        active_params(layout.text_config),
        plan["draft"]["matmul_params"],
        plan["draft"]["positions_per_token"],
    )
    return plan_cost(recipe, numbers, with_recipe(recipe.cost, defaults))


H200_GIB = 141


def _online_gpu_warnings(recipe: Recipe, memory: dict[str, Any]) -> list[str]:
    """Online training keeps the extraction server up while the draft trains: on one GPU node
    both share the GPUs, and the server reserves engine.gpu_memory_utilization of each."""
    e, t = recipe.engine, recipe.train
    util, need = e.gpu_memory_utilization, memory.get("training_gpu_gib_per_process")
    if t.hidden_states_mode != "online" or e.device != "cuda" or not util or need is None or t.nnodes > 1:
        return []
    left = round((1 - util) * H200_GIB, 1)
    if left >= need:
        return []
    return [
        f"online training shares the node's GPUs with the extraction server, which reserves "
        f"engine.gpu_memory_utilization {util} of each ({H200_GIB} GiB H200): {left} GiB left per GPU, "
        f"training needs ~{need} GiB per process; lower the utilization to <= {1 - need / H200_GIB:.2f} for "
        "training (--set engine.gpu_memory_utilization=...), or train on other GPUs"
    ]


def _bench_gpu_warnings(recipe: Recipe, weights_gib: float | None) -> list[str]:
    """The bench keeps the no-speculation engine up beside each speculative engine (both arms of a
    cell, A/B interleaved: harness/bench/run.py bench_verifier), so it holds two serving instances
    and two copies of the verifier's weights at once. train.nproc_per_node stands for a node's GPUs."""
    from harness.train.cost import serving_gpus

    gpus, node = serving_gpus(recipe.engine), recipe.train.nproc_per_node
    if not gpus or 2 * gpus <= node:
        return []
    weights = f" and two copies of the verifier's weights ({2 * weights_gib:,.0f} GiB)" if weights_gib else ""
    return [
        f"the bench keeps the no-speculation engine up beside each speculative engine: 2 x {gpus} GPUs"
        f"{weights} at once, more than one node of {node} GPUs (train.nproc_per_node): the harness starts "
        "both engines on the machine it runs on, so on such a node the speculative engine fails to start"
    ]


def _weights_gib(layout: VerifierLayout) -> float | None:
    import json

    index = Path(layout.path) / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if total:
            return round(total / GIB, 1)
    return None


def render_plan(plan: dict[str, Any], console) -> None:
    from rich.pretty import Pretty
    from rich.rule import Rule

    console.print(f"[bold]dry run[/] of recipe {plan['recipe']}: verifier from {plan['verifier_source']}")
    for section, body in plan.items():
        if section in ("recipe", "verifier_source"):
            continue
        console.print(Rule(section, align="left"))
        if section == "cost":
            from harness.train.cost import render_cost

            render_cost(body, console)
            continue
        console.print(Pretty(body, expand_all=False), soft_wrap=True)
    checks = plan.get("checks", {})
    for w in checks.get("warnings", []):
        console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    console.print("[green]plan validated: no problems[/]" if checks.get("ok", True) else "[red]problems found[/]")
