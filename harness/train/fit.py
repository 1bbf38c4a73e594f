"""Draft training with speculators' own Trainer: the same code on CPU and under torchrun.

The draft is speculators' `Eagle3DraftModel` built through the patched loader; batches are
packed by speculators' `MultipackDistributedBatchSamplerV2` and `CollateFn` with its EAGLE-3
`shift_batch`; the loop, losses, metrics, checkpoints and resume are its `Trainer`.
`HarnessTrainer` adds only what a CPU needs, and only when there is no accelerator:
  - the device is `cpu` (the Trainer assumes an accelerator index, `model.to(0)`, and falls
    back to autocast device "cuda");
  - checkpoints load onto the CPU (speculators' `get_current_device()` says "cuda:0" there);
  - its step profiler calls `torch.accelerator.synchronize()`, which raises without an
    accelerator: during CPU runs the Trainer's `_StepTimer` is swapped for one that skips the
    synchronisation (scoped to `run_training`, never at import).
tests/test_train_guards.py pins the speculators internals these rely on.

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

from harness.train.hidden_states import SHARD_GLOB

METRICS_LOGGER = "speculators.metrics"


def _cpu() -> bool:
    return not torch.accelerator.is_available()


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
    every = max(2, round(1 / validation_fraction))
    val = [x for j, x in enumerate(all_idx) if j % every == every - 1]
    train = [x for j, x in enumerate(all_idx) if j % every != every - 1]
    return train, val


def make_loader(dataset: ShardDataset, total_seq_len: int, hidden_size: int, num_aux: int, seed: int):
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn
    from speculators.train.distributed import get_dp_rank, get_dp_size
    from speculators.train.distributed_batch_sampler import MultipackDistributedBatchSamplerV2
    from torch.utils.data import DataLoader

    sampler = MultipackDistributedBatchSamplerV2(
        batch_max_length=total_seq_len, lengths=dataset.approx_lengths,
        num_replicas=get_dp_size(), rank=get_dp_rank(), seed=seed,
    )
    return DataLoader(dataset, batch_sampler=sampler, num_workers=0,
                      collate_fn=CollateFn(total_seq_len, hidden_size, num_target_layers=num_aux,
                                           dtype=dataset.hidden_states_dtype, preprocess=shift_batch))


def _trainer_class():
    from speculators.train import trainer as trainer_mod
    from speculators.train.checkpointer import SingleGPUCheckpointer, convert_float_dtype, load_safetensors_state_dict

    class CpuCheckpointer(SingleGPUCheckpointer):
        def load_model_state_dict(self, model, float_dtype=None):
            sd = load_safetensors_state_dict(self.model_path(self.previous_epoch), "cpu")
            model.load_state_dict(convert_float_dtype(sd, float_dtype or model.dtype), strict=False)

        def load_optimizer_state_dict(self, model, optimizer, float_dtype=None):
            loaded = torch.load(self.optimizer_path(self.previous_epoch), weights_only=True, map_location="cpu")
            opts = optimizer if isinstance(optimizer, list) else [optimizer]
            loaded = loaded if isinstance(loaded, list) else [loaded]
            for opt, sd in zip(opts, loaded, strict=True):
                opt.load_state_dict(convert_float_dtype(sd, float_dtype or model.dtype))

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
            if _cpu():
                self.checkpointer = CpuCheckpointer(self.config.save_path)
                self.local_rank = torch.device("cpu")
                self.device_type = "cpu"
            super().setup_trainer()

        def run_training(self):
            with contextlib.ExitStack() as stack:
                if _cpu():
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
                self.on_train({**msg["train"], "global_step": msg.get("global_step"), "epoch": msg.get("epoch"),
                               "lr": msg.get("lr")})
            elif "val" in msg:
                self.on_val({**msg["val"], "epoch": msg.get("epoch")})


def run_fit(plan: dict[str, Any], on_train: Callable[[dict], None] | None = None,
            on_val: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Train from a fit plan (written by the pipeline into the run folder)."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.distributed import get_rank, maybe_destroy_distributed, maybe_setup_distributed
    from speculators.train.trainer import TrainerConfig
    from transformers import LlamaConfig

    from harness.verifier.layout import resolve_layout
    from harness.verifier.loader import build_draft

    torch.manual_seed(plan["seed"])
    maybe_setup_distributed()
    layout = resolve_layout(plan["verifier"], plan.get("weight_keys") or None)
    vocab = torch.load(plan["vocab_path"], weights_only=True)
    dcfg = LlamaConfig(**plan["draft_layer_config"])
    model = build_draft(layout, draft_layer_config=dcfg, aux_layer_ids=plan["aux_layer_ids"],
                        draft_vocab_size=plan["draft_vocab_size"], t2d=vocab["t2d"], d2t=vocab["d2t"],
                        ttt_steps=plan["ttt_steps"], attn_impl=plan["attn_impl"],
                        trust_remote_code=plan.get("trust_remote_code", False))
    if plan.get("init_from"):  # warm start: an existing draft's weights (harness/draft/warm_start.py)
        from harness.draft.warm_start import warm_start

        warm_start(model, plan["init_from"], layout)
    dtype = getattr(torch, plan["hidden_states_dtype"])
    shards = sorted(Path(plan["hidden_dir"]).glob(SHARD_GLOB))
    train_idx, val_idx = split_indices(shards, plan["validation_fraction"])
    n_aux = len(plan["aux_layer_ids"])
    train_loader = make_loader(ShardDataset(shards, train_idx, dtype), plan["total_seq_len"],
                               layout.hidden_size, n_aux, plan["seed"])
    val_loader = make_loader(ShardDataset(shards, val_idx, dtype), plan["total_seq_len"],
                             layout.hidden_size, n_aux, plan["seed"])
    train_kwargs, val_kwargs = Eagle3DraftModel.get_trainer_kwargs(
        ttt_steps=plan["ttt_steps"], ttt_step_loss_decay=plan["ttt_step_loss_decay"],
        loss_fn=plan["loss"], loss_implementation="eager" if _cpu() else "fused")
    config = TrainerConfig(
        lr=plan["lr"], num_epochs=plan["epochs"], save_path=plan["checkpoint_dir"],
        resume_from_checkpoint=True, train_call_kwargs=train_kwargs, val_call_kwargs=val_kwargs,
        scheduler_type=plan["scheduler"], scheduler_warmup_ratio=plan["warmup_ratio"],
        checkpoint_freq=1, hidden_states_dtype=dtype, log_freq=1, fsdp_shard=plan.get("fsdp", False),
        max_steps=plan.get("max_steps"),
    )
    quiet = on_train is not None
    tap = MetricsTap(on_train or (lambda m: None), on_val or (lambda m: None))
    mlog = logging.getLogger(METRICS_LOGGER)
    mlog.addHandler(tap)
    mlog.setLevel(logging.INFO)
    mlog.propagate = False
    try:
        trainer_cls = _trainer_class()
        trainer_cls.quiet = quiet
        trainer = trainer_cls(model, config, train_loader, val_loader)
        trainer.run_training()
    finally:
        mlog.removeHandler(tap)
    result = {"num_train_samples": len(train_idx), "num_val_samples": len(val_idx),
              "train_tokens_per_epoch": sum(train_loader.dataset.approx_lengths),
              "global_step": trainer.global_step, "rank": get_rank()}
    maybe_destroy_distributed()
    return result


def main(argv: list[str] | None = None) -> None:
    """torchrun entry: python -m harness.train.fit RUN_DIR."""
    args = argv if argv is not None else sys.argv[1:]
    run_dir = Path(args[0])
    plan = json.loads((run_dir / "fit_plan.json").read_text())
    out = run_fit(plan)
    if out["rank"] == 0:
        (run_dir / "fit_result.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
