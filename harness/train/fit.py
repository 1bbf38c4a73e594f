"""Draft training with speculators' own Trainer: the same code on CPU and under torchrun.

The draft is speculators' `Eagle3DraftModel` built through the patched loader; batches are
packed by speculators' `MultipackDistributedBatchSamplerV2` and `CollateFn` with its EAGLE-3
`shift_batch`; the loop, losses, metrics, checkpoints and resume are its `Trainer`.
`HarnessTrainer` adds only what a CPU needs, and only when the plan's `device` is "cpu" or
there is no accelerator (a plan without `device` trains on the accelerator when there is one):
  - the device is `cpu` (the Trainer assumes an accelerator index, `model.to(0)`, and falls
    back to autocast device "cuda");
  - checkpoints load onto the CPU (speculators' `get_current_device()` says "cuda:0" there);
  - its step profiler calls `torch.accelerator.synchronize()`, which raises without an
    accelerator: during CPU runs the Trainer's `_StepTimer` is swapped for one that skips the
    synchronisation (scoped to `run_training`, never at import).
tests/train/test_fit.py pins the speculators internals these rely on.

Entry point for torchrun: `python -m harness.train.fit RUN_DIR` (rank setup is speculators').
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from harness.train.hidden_states import SHARD_GLOB, is_held_out
from harness.train.records import FitConfig, dflash_anchors

METRICS_LOGGER = "speculators.metrics"
TORCHRUN_RESULT = "torchrun_result.json"  # rank 0's result and metrics under torchrun, read by the pipeline


def on_cpu(plan: FitConfig) -> bool:
    """Train on the CPU: the plan asks for it (`device` = the recipe's engine.device), or there
    is no accelerator to train on."""
    return plan.device == "cpu" or not torch.accelerator.is_available()


class ShardDataset:
    """Samples from hidden-state shards (memory-mapped: resident memory stays bounded)."""

    def __init__(self, shard_paths: list[Path], indices: list[tuple[int, int]], dtype: torch.dtype):
        self.shards = [torch.load(p, mmap=True, weights_only=True) for p in shard_paths]
        self.indices = indices
        self.hidden_states_dtype = dtype
        self.approx_lengths = [len(self.shards[s][i]["input_ids"]) for s, i in indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        s, i = self.indices[index]
        r = self.shards[s][i]
        data = {
            "hidden_states": r["hidden_states"].flatten(1),  # [T, n_aux * H]
            "input_ids": r["input_ids"],
            "verifier_last_hidden_states": r["verifier_last_hidden_states"],
            "loss_mask": r["loss_mask"],
        }
        n = data["input_ids"].shape[0]
        data["lengths"] = torch.tensor([n], dtype=torch.long)
        data["position_ids"] = torch.arange(n, dtype=torch.long)
        return data


def split_indices(shard_paths: list[Path], validation_fraction: float) -> tuple[list, list]:
    """Every k-th sample is held out (deterministic, spread over all prompts)."""
    all_idx = []
    for s, p in enumerate(shard_paths):
        n = len(torch.load(p, mmap=True, weights_only=True))
        all_idx += [(s, i) for i in range(n)]
    val = [x for j, x in enumerate(all_idx) if is_held_out(j, validation_fraction)]
    train = [x for j, x in enumerate(all_idx) if not is_held_out(j, validation_fraction)]
    return train, val


def make_loader(
    dataset: ShardDataset | Any,
    total_seq_len: int,
    hidden_size: int,
    num_aux: int,
    seed: int,
    workers: int = 0,
    method: str = "eagle3",
):
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn
    from speculators.train.distributed import get_dp_rank, get_dp_size
    from speculators.train.distributed_batch_sampler import MultipackDistributedBatchSamplerV2
    from torch.utils.data import DataLoader

    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=total_seq_len,
        lengths=dataset.approx_lengths,
        num_replicas=get_dp_size(),
        rank=get_dp_rank(),
        seed=seed,
    )
    # a map-style dataset by duck typing (__len__/__getitem__), not a torch Dataset subclass
    return DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_sampler=sampler,
        # online, workers ask the extraction server ahead of the trainer (each its own client,
        # set up lazily in the worker); shards on disk are memory-mapped and read in-process
        num_workers=workers,
        prefetch_factor=2 if workers else None,
        persistent_workers=workers > 0,
        collate_fn=CollateFn(
            total_seq_len,
            hidden_size,
            num_target_layers=num_aux,
            dtype=dataset.hidden_states_dtype,
            # EAGLE-3 and P-EAGLE predict the next token from each position (speculators shifts the
            # batch); DFlash aligns its block targets itself and takes the batch as it is (its cli too)
            preprocess=None if method == "dflash" else shift_batch,
        ),
    )


def _trainer_class(cpu: bool):
    from speculators.train import trainer as trainer_mod
    from speculators.train.checkpointer import (
        DistributedCheckpointer,
        SingleGPUCheckpointer,
        convert_float_dtype,
        load_safetensors_state_dict,
    )

    class CpuCheckpointer(SingleGPUCheckpointer):
        def load_model_state_dict(self, model, float_dtype=None):
            sd = load_safetensors_state_dict(self.model_path(self.previous_epoch), "cpu")
            model.load_state_dict(convert_float_dtype(sd, float_dtype or model.dtype), strict=False)

        def load_optimizer_state_dict(self, model, optimizer, float_dtype=None):
            loaded = torch.load(self.optimizer_path(self.previous_epoch), weights_only=True, map_location="cpu")
            opts = optimizer if isinstance(optimizer, list) else [optimizer]
            loaded = loaded if isinstance(loaded, list) else [loaded]
            raw = getattr(model, "module", model)  # under torchrun the model is DDP-wrapped
            for opt, sd in zip(opts, loaded, strict=True):
                opt.load_state_dict(convert_float_dtype(sd, float_dtype or raw.dtype))

    class _CpuStepTimer(trainer_mod._StepTimer):  # noqa: SLF001
        def mark(self, name: str) -> None:
            if self.enabled:
                import time

                self._marks[name] = time.perf_counter()

        def now(self):
            import time

            return time.perf_counter() if self.enabled else None

    class HarnessTrainer(trainer_mod.Trainer):
        quiet = False  # True under the harness's own progress display

        def setup_trainer(self):
            if cpu:
                # FSDP under torchrun keeps speculators' DistributedCheckpointer: it gathers the sharded
                # state onto the CPU itself (the single-process one would save the ranks' DTensor shards)
                if not isinstance(self.checkpointer, DistributedCheckpointer):
                    self.checkpointer = CpuCheckpointer(self.config.save_path)
                self.local_rank = torch.device("cpu")
                self.device_type = "cpu"
            super().setup_trainer()

        def run_training(self):
            with contextlib.ExitStack() as stack:
                if cpu:
                    stack.enter_context(_swap_attr(trainer_mod, "_StepTimer", _CpuStepTimer))
                if self.quiet:  # its tqdm bar would fight the harness's rich display
                    stack.enter_context(_swap_attr(trainer_mod, "tqdm", lambda it, **kw: it))
                return super().run_training()

    return HarnessTrainer


@contextlib.contextmanager
def _swap_attr(obj: Any, name: str, value: Any):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


class MetricsTap(logging.Handler):
    """Receives speculators' metric records (the dicts its Trainer logs) as they happen."""

    def __init__(self, on_train: Callable[[dict], None], on_val: Callable[[dict], None]):
        super().__init__()
        self.on_train, self.on_val = on_train, on_val

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if isinstance(msg, dict):
            if "train" in msg:
                self.on_train(
                    {
                        **msg["train"],
                        "global_step": msg.get("global_step"),
                        "epoch": msg.get("epoch"),
                        "lr": msg.get("lr"),
                    }
                )
            elif "val" in msg:
                self.on_val({**msg["val"], "epoch": msg.get("epoch")})


def _draft_for(plan: FitConfig):
    """The speculators draft for the plan's verifier (through the patched loader), vocab mapped."""
    from harness.verifier.layout import resolve_layout
    from harness.verifier.loader import build_draft, layer_config

    layout = resolve_layout(plan.verifier, plan.weight_keys or None)
    vocab = torch.load(plan.vocab_path, weights_only=True)
    model = build_draft(
        layout,
        draft_layer_config=layer_config(plan.method, plan.draft_layer_config),
        aux_layer_ids=plan.aux_layer_ids,
        draft_vocab_size=plan.draft_vocab_size,
        t2d=vocab["t2d"],
        d2t=vocab["d2t"],
        ttt_steps=plan.ttt_steps,
        attn_impl=plan.attn_impl,
        trust_remote_code=plan.trust_remote_code,
        method=plan.method,
        mask_token_id=plan.mask_token_id,
    )
    if plan.init_from:  # warm start: an existing draft's weights (harness/draft/warm_start.py)
        from harness.draft.warm_start import warm_start

        warm_start(model, plan.init_from, layout)
    return model, layout


def _loaders(plan: FitConfig, hidden_size: int):
    """(train samples, val samples, train loader, val loader): over the hidden-state shards, or,
    online, over speculators' ArrowDatasets that ask the extraction server (harness/train/online.py)."""
    dtype = getattr(torch, plan.hidden_states_dtype)
    n_aux = len(plan.aux_layer_ids)
    if plan.online is not None:
        from harness.train.online import datasets_for

        ds = datasets_for(plan, plan.online)
        loaders = [
            make_loader(ds[s], plan.total_seq_len, hidden_size, n_aux, plan.seed, plan.loader_workers, plan.method)
            for s in ("train", "val")
        ]
        return list(range(len(ds["train"]))), list(range(len(ds["val"]))), *loaders  # type: ignore[arg-type]
    shards = sorted(Path(plan.hidden_dir).glob(SHARD_GLOB))
    train_idx, val_idx = split_indices(shards, plan.validation_fraction)
    train, val = (
        make_loader(ShardDataset(shards, idx, dtype), plan.total_seq_len, hidden_size, n_aux, plan.seed, 0, plan.method)
        for idx in (train_idx, val_idx)
    )
    return train_idx, val_idx, train, val


def _trainer(plan: FitConfig, model, loaders, cpu: bool, save_path: str, quiet: bool):
    """speculators' Trainer for the plan (the harness's CPU-capable subclass), not yet run."""
    from speculators.train.trainer import TrainerConfig

    # speculators' fused losses are Triton kernels: eager on the CPU
    common = {"loss_fn": plan.loss, "loss_implementation": "eager" if cpu else "fused"}
    method_kwargs: dict[str, Any]
    if plan.method == "peagle":
        method_kwargs = {"num_depths": plan.ttt_steps, "max_anchors": plan.max_anchors}
    elif plan.method == "dflash":
        # D-PACE position weights: speculators' CLI default for DFlash (its issue 979 recipe)
        method_kwargs = {
            "max_anchors": dflash_anchors(plan.max_anchors, plan.total_seq_len, plan.ttt_steps),
            "per_position_loss_weight": "dpace",
        }
    else:
        method_kwargs = {"ttt_steps": plan.ttt_steps, "ttt_step_loss_decay": plan.ttt_step_loss_decay}
    train_kwargs, val_kwargs = type(model).get_trainer_kwargs(**common, **method_kwargs)
    config = TrainerConfig(
        lr=plan.lr,
        num_epochs=plan.epochs,
        save_path=save_path,
        resume_from_checkpoint=True,
        train_call_kwargs=train_kwargs,
        val_call_kwargs=val_kwargs,
        scheduler_type=plan.scheduler,
        scheduler_warmup_ratio=plan.warmup_ratio,
        checkpoint_freq=1,
        hidden_states_dtype=getattr(torch, plan.hidden_states_dtype),
        log_freq=1,
        fsdp_shard=plan.fsdp,
        max_steps=plan.max_steps,
    )
    trainer_cls = _trainer_class(cpu)
    trainer_cls.quiet = quiet
    return trainer_cls(model, config, *loaders)


@contextlib.contextmanager
def _metrics_tap(on_train: Callable[[dict], None] | None, on_val: Callable[[dict], None] | None):
    tap = MetricsTap(on_train or (lambda m: None), on_val or (lambda m: None))
    mlog = logging.getLogger(METRICS_LOGGER)
    mlog.addHandler(tap)
    mlog.setLevel(logging.INFO)
    mlog.propagate = False
    try:
        yield
    finally:
        mlog.removeHandler(tap)


def run_fit(
    plan: FitConfig, on_train: Callable[[dict], None] | None = None, on_val: Callable[[dict], None] | None = None
) -> dict[str, Any]:
    """Train from a fit plan (written by the pipeline into the run folder)."""
    from speculators.train.distributed import get_rank, get_world_size, maybe_destroy_distributed

    from harness.train.launch import setup_distributed

    torch.manual_seed(plan.seed)
    cpu = on_cpu(plan)
    setup_distributed()
    model, layout = _draft_for(plan)
    train_idx, val_idx, train_loader, val_loader = _loaders(plan, layout.hidden_size)
    with _metrics_tap(on_train, on_val):
        trainer = _trainer(plan, model, (train_loader, val_loader), cpu, plan.checkpoint_dir, on_train is not None)
        trainer.run_training()
    result = {
        "num_train_samples": len(train_idx),
        "num_val_samples": len(val_idx),
        "train_tokens_per_epoch": sum(train_loader.dataset.approx_lengths),
        "global_step": trainer.global_step,
        "rank": get_rank(),
        "world_size": get_world_size(),
        # what actually ran: the draft's own attention setting, the loss kernels chosen here
        "device": "cpu" if cpu else f"{trainer.device_type}:{trainer.local_rank}",
        "attn_impl": getattr(model, "_attn_impl", plan.attn_impl),
        "loss_implementation": "eager" if cpu else "fused",
    }
    maybe_destroy_distributed()
    return result


def evaluate_draft(plan: FitConfig) -> dict[str, float]:
    """The draft as the plan builds it (fresh, or warm-started from `plan.init_from`), scored on
    the plan's held-out split before any training step: speculators' validation metrics
    (`full_acc_<k>_epoch`, `cond_acc_<k>_epoch`, `loss_epoch`). Single process."""
    import tempfile

    torch.manual_seed(plan.seed)
    cpu = on_cpu(plan)
    model, layout = _draft_for(plan)
    _, _, train_loader, val_loader = _loaders(plan, layout.hidden_size)
    with tempfile.TemporaryDirectory(prefix="harness-eval-") as tmp, _metrics_tap(None, None):
        trainer = _trainer(plan, model, (train_loader, val_loader), cpu, tmp, quiet=True)
        with _swap_attr(sys.modules["speculators.train.trainer"], "tqdm", lambda it, **kw: it):
            return trainer.val_epoch(0) or {}


def _wait_for(path: Path, timeout_s: float = 3600) -> Path:
    """On the other nodes the command may start before node 0's harness has prepared the run
    (responses, hidden states, then fit_plan.json): wait for it rather than fail."""
    import time

    deadline = time.monotonic() + timeout_s
    if not path.is_file():
        print(f"waiting for {path} (written by the harness on node 0 before it starts training)", file=sys.stderr)
    while not path.is_file():
        if time.monotonic() > deadline:
            raise SystemExit(
                f"{path} did not appear within {timeout_s:.0f}s; is the harness running on node 0 "
                "with the same run folder (a shared file system)?"
            )
        time.sleep(2)
    return path


def main(argv: list[str] | None = None) -> None:
    """torchrun entry: python -m harness.train.fit RUN_DIR. Every rank trains; rank 0 alone
    writes the result and the metrics curve (checkpoints are speculators' rank-0 saves)."""
    from harness.provenance import atomic_write_json

    args = argv if argv is not None else sys.argv[1:]
    run_dir = Path(args[0])
    plan = FitConfig.from_dict(json.loads(_wait_for(run_dir / "fit_plan.json").read_text()))
    curve: list[dict[str, Any]] = []
    val: list[dict[str, Any]] = []
    out = run_fit(plan, on_train=curve.append, on_val=val.append)
    if out["rank"] == 0:
        atomic_write_json(run_dir / TORCHRUN_RESULT, {"result": out, "train": curve, "val": val})


if __name__ == "__main__":
    main()
