"""The dry run's sections for the training stages (harness/plan/dry_run.py): the responses the
verifier will generate, the hidden states and their disk in either mode, the draft's size and the
memory its training takes, the training command. Counts come from the prompts as the real run reads
them where they are on this machine, else from the recipe's settings.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from harness.plan.commands import GIB, Commands, verifier_weights_gib
from harness.recipe import Recipe
from harness.train.records import dflash_anchors
from harness.verifier.layout import VerifierLayout


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


CHARS_PER_TOKEN, TEMPLATE_TOKENS = 4, 32  # English through a 32k+ BPE vocabulary; a chat template's turn markers


def _prompt_tokens(recipe: Recipe) -> int:
    """Tokens of a prompt turn: its characters / 4 + the template's 32 where the prompts are on this
    machine (an estimate: no tokenizer is read), else 256."""
    records = _prompt_records(recipe)
    if not records:
        return 256
    chars = [sum(len(m.get("content") or "") for m in r.first_messages() or []) or len(r.prompt or "") for r in records]
    return round(sum(chars) / len(chars) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS


def _sample_tokens(recipe: Recipe, per_prompt: int) -> int:
    """Prompt + response tokens of every sample at `per_prompt` tokens a prompt turn, each response
    at train.max_new_tokens; the long documents' exactly."""
    t = recipe.train
    short = _prompt_set_size(recipe) or 0
    tokens = short * (t.max_new_tokens + per_prompt) + t.long_documents * t.max_new_tokens
    tokens += _long_document_tokens(recipe)
    # a later turn t holds the t turns before it, answers included, then its own
    return tokens + sum((turn + 1) * (t.max_new_tokens + per_prompt) for turn in _later_turns(recipe))


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


def responses_section(recipe: Recipe, cmds: Commands) -> dict[str, Any]:
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


def hidden_states_section(recipe: Recipe, cmds: Commands, aux: list[int], run_dir: Path) -> dict[str, Any]:
    from harness.train.hidden_states import DTYPE_BYTES

    t, layout = recipe.train, cmds.layout
    tokens = _sample_tokens(recipe, 256)  # ~256 prompt tokens a turn: a bound for the disk
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
        # what the cost model prices (harness/plan/cost.py): the prompts' own length where they are known
        "expected_tokens": _sample_tokens(recipe, _prompt_tokens(recipe)),
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


def draft_and_memory_sections(recipe: Recipe, layout: VerifierLayout, aux: list[int]) -> dict[str, Any]:
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
    weights_gib = verifier_weights_gib(layout)
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


def training_section(recipe: Recipe, run_dir: Path) -> dict[str, Any]:
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
