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
from harness.plan.spread import spread_section
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
    from harness.cluster import gpu_memory_gib
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
    weights_gib, mem = _weights_gib(layout), gpu_memory_gib(recipe)
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
        from harness.cluster import extraction_engine
        from harness.train.online import disk_bound
        from harness.train.vllm_states import extraction_plan

        ext = dataclasses.replace(
            extraction_plan(extraction_engine(recipe), layout, aux, run_dir / "hidden_raw"),
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
        # as harness/bench/run.py plans them: thinking modes, extra cells, dynamic k and reference drafts included
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


def engine_record(plan) -> dict[str, Any]:
    """The part of an engine plan a run records and the dry run prints: model, arguments, environment."""
    return {
        "model": plan.model,
        "engine_kwargs": plan.engine_kwargs,
        "env": plan.env,
        "workarounds": list(plan.workarounds),
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
    from harness.plan.figures import active_params, default_figures, with_recipe
    from harness.plan.stages import PlanNumbers, serving_gpus

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
