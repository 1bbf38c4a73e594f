"""Training hidden states from a transformers forward, with exactly vLLM's layer semantics.

vLLM's EAGLE-3 aux id i is the residual stream *entering* decoder layer i (the output of layer
i-1; id 0 = the embeddings). transformers' `hidden_states[i]` is the same tensor for i < L; its
last entry is taken *after* the final norm, but the draft's loss applies the verifier's norm
itself, so the last state saved here is the *input* of the final norm (a forward pre-hook).
tests/train/test_hidden_states.py checks both facts against the model's own layers.

Samples are streamed into shards of `shard_size` samples (memory is bounded by one shard);
each shard is written atomically, so an interrupted run resumes at the first missing shard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.provenance import atomic_path

SHARD_GLOB = "shard-*.pt"
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2}  # "auto": bf16 for the verifiers here


@dataclass(frozen=True)
class Sample:
    id: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]

    @property
    def input_ids(self) -> list[int]:
        return list(self.prompt_ids) + list(self.output_ids)

    def loss_mask(self) -> torch.Tensor:
        """1 at position t when token t+1 is a response token: the verifier's prediction there
        is a draft target. The last position has no next token."""
        n, p = len(self.prompt_ids) + len(self.output_ids), len(self.prompt_ids)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[max(p - 1, 0) : n - 1] = True
        return mask


def forward_states(model, batch: Sequence[Sample], aux_layer_ids: Sequence[int]) -> list[dict[str, torch.Tensor]]:
    """One padded forward; per sample: aux states [T, n_aux, H] and the pre-norm last state [T, H]."""
    lens = [len(s.input_ids) for s in batch]
    t_max = max(lens)
    ids = torch.zeros(len(batch), t_max, dtype=torch.long)
    att = torch.zeros(len(batch), t_max, dtype=torch.long)
    for i, s in enumerate(batch):
        ids[i, : lens[i]] = torch.tensor(s.input_ids)
        att[i, : lens[i]] = 1
    captured: dict[str, torch.Tensor] = {}
    norm = model.model.norm
    handle = norm.register_forward_pre_hook(lambda mod, args: captured.__setitem__("last", args[0]))
    try:
        with torch.no_grad():  # on the model's device (the CPU here, a GPU in scripts/gpu_train_check.py)
            out = model.model(
                input_ids=ids.to(model.device),
                attention_mask=att.to(model.device),
                output_hidden_states=True,
                use_cache=False,
            )
    finally:
        handle.remove()
    aux = torch.stack([out.hidden_states[i] for i in aux_layer_ids], dim=2)  # [B, T, n_aux, H]
    last = captured["last"]  # [B, T, H]
    return [{"aux": aux[i, : lens[i]], "last": last[i, : lens[i]]} for i in range(len(batch))]


def _batches(samples: Sequence[Sample], max_tokens: int | None) -> Iterator[list[Sample]]:
    if max_tokens is None:  # the source batches itself (a server with its own concurrency)
        yield list(samples)
        return
    batch: list[Sample] = []
    longest = 0
    for s in samples:
        n = len(s.input_ids)
        if batch and max(longest, n) * (len(batch) + 1) > max_tokens:
            yield batch
            batch, longest = [], 0
        batch.append(s)
        longest = max(longest, n)
    if batch:
        yield batch


def is_held_out(j: int, validation_fraction: float) -> bool:
    """Sample j (in sample order) is in the validation split: every k-th sample, spread over all
    prompts; the offline shards and the online tables split by this one rule."""
    every = max(2, round(1 / validation_fraction))
    return j % every == every - 1


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.pt"


StatesFn = Callable[[Sequence[Sample]], list[dict[str, torch.Tensor]]]


def transformers_states(model, aux_layer_ids: Sequence[int]) -> StatesFn:
    """The CPU source: a transformers forward (see the module doc)."""
    return lambda batch: forward_states(model, batch, aux_layer_ids)


def extract_to_shards(
    states: StatesFn,
    samples: Sequence[Sample],
    folder: Path,
    *,
    shard_size: int,
    max_batch_tokens: int | None,
    dtype: torch.dtype = torch.bfloat16,
    on_progress: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write every sample's states (from `states`: transformers here, vLLM on GPU, see
    vllm_states.py) into shards; finished shards are kept and skipped. `states` gets padded
    batches of at most `max_batch_tokens`, or each whole shard when that is None."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(0, len(samples), shard_size):
        path = shard_path(folder, k // shard_size)
        paths.append(path)
        chunk = samples[k : k + shard_size]
        if path.exists():
            if on_progress:
                on_progress(len(chunk))
            continue
        records: list[dict[str, Any]] = []
        # sort by length inside the shard so padding stays small
        for batch in _batches(sorted(chunk, key=lambda s: len(s.input_ids)), max_batch_tokens):
            for s, st in zip(batch, states(batch), strict=True):
                records.append(
                    {
                        "id": s.id,
                        "input_ids": torch.tensor(s.input_ids, dtype=torch.long),
                        # shards hold CPU tensors whatever device made them (the loader memory-maps them)
                        "hidden_states": st["aux"].to("cpu", dtype).contiguous(),
                        "verifier_last_hidden_states": st["last"].to("cpu", dtype).contiguous(),
                        "loss_mask": s.loss_mask(),
                    }
                )
            if on_progress:
                on_progress(len(batch))
        order = {s.id: i for i, s in enumerate(chunk)}
        records.sort(key=lambda r: order[r["id"]])
        size = sum(v.nbytes for r in records for v in r.values() if isinstance(v, torch.Tensor))
        with atomic_path(path, size) as tmp:
            torch.save(records, tmp)
    return paths


def pending_tokens(samples: Sequence[Sample], folder: Path, shard_size: int) -> int:
    """Tokens of the samples whose shard is not written yet: what a (resumed) extraction writes."""
    return sum(
        len(s.input_ids)
        for k in range(0, len(samples), shard_size)
        if not shard_path(folder, k // shard_size).exists()
        for s in samples[k : k + shard_size]
    )
