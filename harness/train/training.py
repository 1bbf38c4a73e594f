"""The training stages of `harness train` (harness/train/pipeline.py): the fit plan (fit_plan.json),
speculators' Trainer in this process or under torchrun (launch.json, checkpoints/, fit_result.json,
train_curve.json; an online run beside its extraction server), and the final draft copied from the
last checkpoint with harness.json (draft/).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any, cast

from harness import interrupts
from harness.draft.config import draft_layer_config, mask_token_id
from harness.draft.formats import inspect_draft
from harness.draft.verifier import load_tokenizer
from harness.errors import BadInput, disk_full_as_infra
from harness.provenance import atomic_dir, atomic_write_json, content_hash
from harness.recipe import MASKED_METHODS, Recipe
from harness.train.records import FitConfig, TrainReport, held_out_full_acc, position_acc_key
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout


def fit_config(recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int]) -> FitConfig:
    t = recipe.train
    return FitConfig(
        verifier=layout.path,
        weight_keys=dict(cast("dict[str, str]", recipe.verifier.weight_keys)),
        trust_remote_code=recipe.engine.trust_remote_code,
        vocab_path=str(run_dir / "vocab.pt"),
        hidden_dir=str(run_dir / "hidden"),
        checkpoint_dir=str(run_dir / "checkpoints"),
        draft_layer_config=draft_layer_config(recipe, layout, recipe.engine.max_model_len),
        aux_layer_ids=aux_ids,
        draft_vocab_size=recipe.draft.draft_vocab_size,
        ttt_steps=t.ttt_steps,
        ttt_step_loss_decay=t.ttt_step_loss_decay,
        loss=recipe.train_loss,
        # the Trainer autocasts to this dtype: float32 on a CPU that would emulate bf16 (harness/hardware.py);
        # the shards on disk keep train.hidden_states_dtype
        attn_impl=t.attn_impl,
        hidden_states_dtype=_train_compute_dtype(recipe),
        validation_fraction=t.validation_fraction,
        total_seq_len=t.total_seq_len,
        lr=t.lr,
        epochs=t.epochs,
        max_steps=t.max_steps,
        scheduler=t.scheduler,
        warmup_ratio=t.warmup_ratio,
        seed=t.seed,
        fsdp=t.fsdp,
        init_from=t.init_from,
        device=recipe.engine.device,  # "cpu" trains on the CPU even beside an accelerator
        loader_workers=t.online_loader_workers if t.hidden_states_mode == "online" else 0,
        method=recipe.draft.method,
        mask_token_id=mask_token_id(recipe, layout, load_tokenizer(layout, recipe.engine.trust_remote_code))
        if recipe.draft.method in MASKED_METHODS
        else None,
        max_anchors=t.max_anchors,
    )


def _fit_with_torchrun(recipe: Recipe, run_dir: Path, reporter: Reporter) -> tuple[dict[str, Any], list, list]:
    """Start the dry run's torchrun command (recorded in launch.json) and read rank 0's results."""
    import os

    from harness.train.fit import TORCHRUN_RESULT
    from harness.train.launch import launch_env, resolved_command, run_torchrun, torchrun_command

    printed = torchrun_command(recipe, run_dir)
    cmd = resolved_command(printed, dict(os.environ))
    env = launch_env(dict(os.environ), recipe)
    atomic_write_json(
        run_dir / "launch.json",
        {"dry_run_command": printed, "command": cmd, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS")},
    )
    reporter.log("$ " + " ".join(cmd))
    run_torchrun(cmd, run_dir, env)
    rank0 = json.loads((run_dir / TORCHRUN_RESULT).read_text())
    return rank0["result"], rank0["train"], rank0["val"]


def stage_fit(
    recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int], reporter: Reporter
) -> dict[str, Any]:
    out = run_dir / "fit_result.json"
    if out.is_file():
        return json.loads(out.read_text())
    plan = fit_config(recipe, layout, run_dir, aux_ids)
    t0 = time.perf_counter()
    if recipe.train.hidden_states_mode == "online":
        from harness.train.online import DirPeak, extraction_server

        cache = run_dir / "hidden_raw"
        with extraction_server(recipe, layout, run_dir, aux_ids, cache) as src, DirPeak(cache) as peak:
            started = round(time.perf_counter() - t0, 1)  # the extraction server's start, part of wall_s
            result, curve, val = _run_fit(recipe, run_dir, dataclasses.replace(plan, online=src), reporter)
        bound = json.loads((run_dir / "hidden" / "done.json").read_text())["disk_bound_bytes"]
        result.update(
            online_cache_peak_bytes=peak.peak,
            online_cache_bound_bytes=bound,
            online_cache_polls=peak.samples,
            extraction_start_s=started,
        )
    else:
        result, curve, val = _run_fit(recipe, run_dir, plan, reporter)
    # speculators' Trainer catches a terminating signal, saves a checkpoint and returns as if done:
    # an interrupted fit must not be recorded as finished (a rerun resumes from that checkpoint)
    interrupts.check()
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["train_tokens"] = result.get("train_tokens_per_epoch", 0) * recipe.train.epochs
    result["train_tok_per_s"] = result["train_tokens"] / result["wall_s"] if result["wall_s"] else None
    atomic_write_json(run_dir / "train_curve.json", {"train": curve, "val": val})
    atomic_write_json(out, result)
    return result


def _run_fit(
    recipe: Recipe, run_dir: Path, plan: FitConfig, reporter: Reporter
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """speculators' Trainer on the plan (in this process, or under torchrun): (result, train
    metrics per step, validation metrics per epoch)."""
    atomic_write_json(run_dir / "fit_plan.json", plan.to_dict())
    for name in drop_incomplete_checkpoints(Path(plan.checkpoint_dir)):
        reporter.log(f"checkpoint {name} was left half-written by an interrupted run: removed, its epoch reruns")
    curve: list[dict[str, Any]] = []
    val: list[dict[str, Any]] = []
    init = _init_accuracy(plan, reporter) if plan.init_from else None
    ckpt = Path(plan.checkpoint_dir)
    # speculators writes the checkpoints (safetensors, torch.save): a full disk names their folder
    with disk_full_as_infra(ckpt, _last_checkpoint_bytes(ckpt), "another checkpoint as big as the last"):
        if recipe.train.launcher == "torchrun":
            result, curve, val = _fit_with_torchrun(recipe, run_dir, reporter)
        else:
            result = _fit_here(recipe, plan, reporter, curve, val)
    result["init_held_out_full_acc"] = init
    return result, curve, val


def _fit_here(
    recipe: Recipe, plan: FitConfig, reporter: Reporter, curve: list[dict[str, Any]], val: list[dict[str, Any]]
) -> dict[str, Any]:
    """speculators' Trainer in this process; its metrics are appended to `curve` and `val` as they come."""
    from harness.train.fit import run_fit

    reporter.stage("training (speculators Trainer)", total=None)

    def on_train(m: dict[str, Any]) -> None:
        curve.append(m)
        fields = {"loss": m.get("loss", float("nan"))}
        for k in range(recipe.train.ttt_steps):
            key = position_acc_key(recipe.draft.method, k)
            if key in m:
                fields[f"acc{k}"] = m[key]
        reporter.advance(1, **fields)

    result = run_fit(plan, on_train=on_train, on_val=val.append)
    reporter.done()
    return result


def _last_checkpoint_bytes(ckpt_dir: Path) -> int | None:
    """The size of the newest finished checkpoint: what the next one needs (None before the first)."""
    done = [p for p in ckpt_dir.glob(f"*/{CHECKPOINT_DONE}") if p.parent.name.isdigit()] if ckpt_dir.is_dir() else []
    if not done:
        return None
    last = max((p.parent for p in done), key=lambda p: int(p.name))
    return sum(f.stat().st_size for f in last.rglob("*") if f.is_file())


# speculators' Trainer writes training_state.json last, after the weights, optimizer and scheduler
CHECKPOINT_DONE = "training_state.json"


def drop_incomplete_checkpoints(ckpt_dir: Path) -> list[str]:
    """Remove the epoch folders a killed save left without CHECKPOINT_DONE: speculators resumes
    from the highest epoch folder it finds and would fail to load a half-written one. Returns
    the removed folders' names."""
    if not ckpt_dir.is_dir():
        return []
    dropped = []
    for p in sorted(ckpt_dir.iterdir()):
        if p.is_dir() and not p.is_symlink() and p.name.isdigit() and not (p / CHECKPOINT_DONE).is_file():
            shutil.rmtree(p)
            dropped.append(p.name)
    return dropped


def _init_accuracy(plan: FitConfig, reporter: Reporter) -> list[float]:
    """A warm start's held-out full accuracy per TTT step before any training step: what the
    init draft brings to this verifier and data."""
    from harness.train.fit import evaluate_draft

    reporter.stage("warm start: held-out accuracy at step 0", total=None)
    metrics = evaluate_draft(plan)
    accs = held_out_full_acc(metrics, plan.method, plan.ttt_steps)
    reporter.done(" ".join(f"{a:.2f}" for a in accs))
    return accs


def _last_checkpoint(ckpt_dir: Path) -> Path:
    epochs = sorted((p for p in ckpt_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not epochs:
        raise BadInput(f"{ckpt_dir}: training produced no checkpoint")
    return epochs[-1]


def stage_draft(recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int], report: TrainReport) -> Path:
    draft = run_dir / "draft"
    if (draft / "harness.json").is_file():
        return draft
    src = _last_checkpoint(run_dir / "checkpoints")
    with atomic_dir(draft) as tmp:
        shutil.copytree(
            src,
            tmp,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("*optimizer*", "*scheduler*", "training_state.json", "*.pt"),
        )
        saved = inspect_draft(tmp)  # reads each method's config (DFlash names its aux ids differently)
        if list(saved.aux_layer_ids) != aux_ids:
            raise BadInput(f"draft config has aux ids {list(saved.aux_layer_ids)} but extraction used {aux_ids}")
        meta = {
            "verifier": {
                "name_or_path": layout.path,
                "architectures": list(layout.architectures),
                "content_hash": content_hash(layout.path),
                "num_layers": layout.num_layers,
                "hidden_size": layout.hidden_size,
                "vocab_size": layout.vocab_size,
            },
            "aux_layer_ids": aux_ids,
            "method": recipe.draft.method,
            "recipe": recipe.name,
            "predicted_acceptance_length": report.predicted_acceptance_length,
            "held_out_full_acc": report.held_out_full_acc,
            "train_context_len": report.train_context_len,
        }
        atomic_write_json(tmp / "harness.json", meta)
    return draft


def _train_compute_dtype(recipe: Recipe) -> str:
    from harness.hardware import cpu_compute_dtype

    dtype = recipe.train.hidden_states_dtype
    return cpu_compute_dtype(dtype) if recipe.engine.device == "cpu" else dtype
