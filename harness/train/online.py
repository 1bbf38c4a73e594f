"""Online training (train.hidden_states_mode = "online"): no hidden states on disk.

speculators 0.9 trains online: its `ArrowDataset(on_missing="generate")` asks a live vLLM
extraction server for each sample's states as the Trainer reads the sample, takes them through
`hs_connectors.FileTransfer` (the file vLLM's connector wrote), checks them
(`check_hidden_states`) and deletes them after use. The harness supplies what it owns: the sample
tables (the same samples, split by the same rule as the offline shards, so a run differs from its
offline twin only in where the states come from), the extraction server (the same plan as the
offline vLLM source, harness/train/vllm_states.py), and a bound on the disk the states occupy,
checked while training runs (`DirPeak`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from harness.engine.settings import EnginePlan
from harness.recipe import Recipe
from harness.train.hidden_states import DTYPE_BYTES, Sample, is_held_out
from harness.train.records import FitConfig, OnlineSource
from harness.verifier.layout import VerifierLayout

SPLITS = ("train", "val")


def write_sample_tables(samples: Sequence[Sample], folder: Path, validation_fraction: float) -> dict[str, int]:
    """The samples as speculators' Arrow tables (`input_ids`, `loss_mask`, `seq_len`; torch
    format), one per split, held out by `is_held_out` like the offline shards. Returns the row
    count per split."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()  # the harness's own progress line covers the stage
    rows: dict[str, list[Sample]] = {"train": [], "val": []}
    for j, s in enumerate(samples):
        rows["val" if is_held_out(j, validation_fraction) else "train"].append(s)
    for split, part in rows.items():
        ds = Dataset.from_dict(
            {
                "input_ids": [list(s.input_ids) for s in part],
                "loss_mask": [s.loss_mask().tolist() for s in part],
                "seq_len": [len(s.input_ids) for s in part],
            }
        )
        ds.set_format(type="torch")
        ds.save_to_disk(str(folder / split))
    return {k: len(v) for k, v in rows.items()}


def cache_bound_bytes(max_tokens: int, num_states: int, hidden_size: int, in_flight: int, bytes_per: int) -> int:
    """The most disk the online states can hold at once: `in_flight` samples of `max_tokens`
    tokens, each with `num_states` states (aux ids + the last layer) of `hidden_size` values at
    `bytes_per` bytes (the dtype vLLM serves in), plus a file being written."""
    return (in_flight + 1) * max_tokens * num_states * hidden_size * bytes_per


def disk_bound(
    recipe: Recipe, layout: VerifierLayout, aux_ids: Sequence[int], extraction: EnginePlan
) -> tuple[int, str]:
    """(bytes, formula) of `cache_bound_bytes` for the recipe: one sample in flight per loader worker
    (train.online_loader_workers; the training process itself when 0) of each training process, each
    at most engine.max_model_len tokens, in the dtype the `extraction` engine serves (after CPU
    workarounds). A worker reads, checks and deletes one sample's file before asking for the next."""
    t = recipe.train
    ranks = t.nproc_per_node * t.nnodes if t.launcher == "torchrun" else 1
    readers = max(1, t.online_loader_workers)
    dtype = extraction.engine_kwargs.get("dtype", recipe.engine.dtype)
    n, hidden, tokens = len(aux_ids) + 1, layout.hidden_size, recipe.engine.max_model_len
    bound = cache_bound_bytes(tokens, n, hidden, ranks * readers, DTYPE_BYTES[dtype])
    who = f"{readers} loader worker(s)" if t.online_loader_workers else "the training process"
    formula = (
        f"({ranks * readers} samples in flight: {ranks} training process(es) x {who}, + 1 being written) "
        f"x engine.max_model_len {tokens} tokens x (aux {len(aux_ids)} + 1) x hidden {hidden} "
        f"x {DTYPE_BYTES[dtype]} B ({dtype})"
    )
    return bound, formula


class AsStored:
    """speculators' online dataset with each sample's states rounded to train.hidden_states_dtype,
    as the offline shards store them: both modes then train on the same numbers (vLLM may serve in
    float32, e.g. on a CPU without native bf16)."""

    def __init__(self, dataset, dtype: str):
        import torch

        self.dataset, self.dtype = dataset, getattr(torch, dtype)
        self.approx_lengths = dataset.approx_lengths
        self.hidden_states_dtype = dataset.hidden_states_dtype

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        item = self.dataset[index]
        if isinstance(item, dict):  # not speculators' SampleUnavailable
            for key in ("hidden_states", "verifier_last_hidden_states"):
                item[key] = item[key].to(self.dtype)
        return item


LOCK_POLL_S = 0.002  # hs_connectors' default is 0.1


def _prompt_transfer(cache_dir: Path):
    """speculators' FileTransfer, its lock wait (hs_connectors `wait_for_lock`: the states file is
    whole once vLLM's writer releases `<file>.lock`) polled every LOCK_POLL_S instead of 100 ms.
    vLLM reports a request finished before its states are written (the write runs a step later), so
    nearly every sample waited a whole poll: measured on the CPU stand-in, 150-165 ms per sample at
    100 ms, 53-60 ms at 2 ms."""
    from hs_connectors import FileTransfer
    from hs_connectors.transfer import wait_for_lock
    from safetensors.torch import load_file

    class PromptFileTransfer(FileTransfer):
        def get_generated(self, hs_transfer_params: dict[str, Any]) -> dict[str, Any] | None:
            path = Path(hs_transfer_params.get("hidden_states_path") or hs_transfer_params["handle"])
            lock = f"{path}.lock"
            if os.path.exists(lock):
                wait_for_lock(lock, poll_interval=LOCK_POLL_S)
            return load_file(path) if path.exists() else None

    return PromptFileTransfer(cache_dir)


def datasets_for(plan: FitConfig, src: OnlineSource) -> dict[str, AsStored]:
    """speculators' online datasets for the plan: generate on a miss, through `src`'s server."""
    import torch
    from speculators.train.data import ArrowDataset

    return {
        split: AsStored(
            ArrowDataset(
                max_len=plan.total_seq_len,
                datapath=str(Path(src.data_dir) / split),
                transfer=_prompt_transfer(Path(src.cache_dir)),
                vllm_endpoint=src.endpoint,
                on_missing="generate",
                hidden_states_dtype=getattr(torch, plan.hidden_states_dtype),
                model=src.model,
            ),
            src.states_dtype,
        )
        for split in SPLITS
    }


@contextlib.contextmanager
def extraction_server(
    recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int], cache_dir: Path
) -> Iterator[OnlineSource]:
    """A vLLM server extracting states at [*aux_ids, L] into `cache_dir`, for as long as the block
    runs; what a killed run left in `cache_dir` is removed first (clear_cache)."""
    from harness.cluster import extraction_engine
    from harness.engine.server import ServerEngine
    from harness.train.vllm_states import extraction_plan

    clear_cache(cache_dir)
    plan = extraction_plan(extraction_engine(recipe), layout, aux_ids, cache_dir)
    log = run_dir / "logs" / "hidden_states.log"
    with ServerEngine(plan, log, recipe.engine.startup_timeout_s, recipe.engine.request_timeout_s) as eng:
        yield OnlineSource(
            eng.url, eng.model_name, str(run_dir / "online"), str(cache_dir), recipe.train.hidden_states_dtype
        )


def clear_cache(cache_dir: Path) -> list[str]:
    """Remove the files a killed run left in the extraction cache (seen: a SIGKILL after an epoch's
    checkpoint left one sample's states and their lock). Request ids are not reused, so nothing
    would read them, but they would stay on disk and count against the run's disk bound. Returns
    the names removed."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(cache_dir):
            if entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return sorted(removed)


def dir_bytes(folder: Path) -> int:
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            with contextlib.suppress(FileNotFoundError):  # deleted between listing and stat
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


class DirPeak:
    """The largest size a folder reached while the block ran, sampled every `interval_s`."""

    def __init__(self, folder: Path, interval_s: float = 0.05):
        self.folder, self.interval_s = folder, interval_s
        self.peak, self.samples = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="harness-dir-peak")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, dir_bytes(self.folder))
            self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> DirPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
