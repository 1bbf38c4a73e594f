"""What an offline engine's host does with its `vllm.LLM` (harness/engine/offline_host.py): a batch
driven step by step (at most `concurrency` requests in flight, every token's arrival timed) and
turned into `GenOutput`s, re-scoring with the verifier's raw or sampling log-probabilities, and
the residual stream entering chosen layers. Runs in the host child, never in the harness."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from harness.engine.base import (
    RESCORE_IN_ENGINE,
    RESCORE_WHOLE_VOCABULARY,
    GenOutput,
    GenRequest,
    Sampling,
    SamplingRescore,
)
from harness.engine.counters import SpecSummary


def _plain_logprobs(positions: Any) -> list[dict[int, float]]:
    """vLLM's per-position {token: Logprob} (list or FlatLogprobs; DELTA: this step's only)
    as plain {token id: logprob}, small to pickle back to the harness."""
    return [{int(t): float(lp.logprob) for t, lp in (pos or {}).items()} for pos in positions or []]


def _tokens_prompt(r: GenRequest):
    """vLLM's prompt for a request: its token ids, and its cache salt when it has one."""
    from vllm.inputs import TokensPrompt

    prompt = TokensPrompt(prompt_token_ids=list(r.prompt_token_ids))
    if r.cache_salt:
        prompt["cache_salt"] = r.cache_salt
    return prompt


def run_batch(
    llm, requests: list[GenRequest], sampling: Sampling, concurrency: int, timeout_s: float
) -> list[GenOutput]:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    pending = deque(requests)
    outs = {r.request_id: GenOutput(r.request_id, len(r.prompt_token_ids)) for r in requests}
    inflight: dict[str, dict[str, float]] = {}
    while pending or inflight:
        while pending and len(inflight) < concurrency:
            r = pending.popleft()
            params = SamplingParams(
                max_tokens=r.max_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                seed=sampling.seed,
                ignore_eos=sampling.ignore_eos,
                stop_token_ids=list(sampling.stop_token_ids) or None,
                logprobs=sampling.logprobs,
                output_kind=RequestOutputKind.DELTA,
            )
            engine.add_request(r.request_id, _tokens_prompt(r), params)
            t = time.perf_counter()
            inflight[r.request_id] = {"start": t, "last": t}
        step_outputs = engine.step()
        now = time.perf_counter()
        for ro in step_outputs:
            st = inflight.get(ro.request_id)
            if st is None:
                continue
            o = outs[ro.request_id]
            comp = ro.outputs[0]
            if comp.token_ids:
                if o.ttft_s is None:
                    o.ttft_s = now - st["start"]
                else:
                    o.itl_s.append(now - st["last"])
                    o.itl_tokens.append(len(comp.token_ids))
                st["last"] = now
                o.output_token_ids.extend(int(t) for t in comp.token_ids)
                if sampling.logprobs is not None:
                    o.logprobs = o.logprobs or []
                    o.logprobs.extend(_plain_logprobs(comp.logprobs))
            if ro.finished:
                o.finish_reason = comp.finish_reason
                o.latency_s = now - st["start"]
                o.spec = SpecSummary.from_vllm(getattr(comp, "spec_decode_metrics", None))
                del inflight[ro.request_id]
        for rid, st in list(inflight.items()):
            if now - st["start"] > timeout_s:
                engine.abort_request([rid])
                outs[rid].error = f"timed out after {timeout_s:.0f}s"
                del inflight[rid]
    return [outs[r.request_id] for r in requests]


def layer_states(llm, token_ids: list[int], layer_ids: list[int]) -> dict[int, Any]:
    """vLLM's residual stream entering `layer_ids` for one prefill of `token_ids`."""
    from functools import partial

    from harness.engine import probe

    llm.apply_model(partial(probe.install, layer_ids=list(layer_ids)))
    try:
        run_batch(llm, [GenRequest("probe", tuple(token_ids), 1)], Sampling(), 1, 600)
    finally:
        states = llm.apply_model(probe.collect)[0]
    return states


def rescore(llm, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
    """The verifier's raw log-probabilities over its whole vocabulary (or its `top` most likely
    tokens and the sequence's own) at every position from `start` on of each token sequence (one
    prefill with prompt_logprobs, nothing sampled): what the model assigns to each token given
    exactly the prefix before it."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=top or -1)
    outs = llm.generate([TokensPrompt(prompt_token_ids=list(ids)) for ids, _ in sequences], params, use_tqdm=False)
    result = []
    for (ids, start), o in zip(sequences, outs, strict=True):
        # prompt_logprobs[i] is the distribution of token i given tokens < i (None at i = 0)
        result.append(
            [
                {int(t): float(lp.logprob) for t, lp in (o.prompt_logprobs[i] or {}).items()}
                for i in range(max(start, 1), len(ids))
            ]
        )
    return result


def rescore_sampling(
    llm, sequences: list[tuple[list[int], int]], temperature: float, top_p: float, top: int
) -> SamplingRescore:
    """The verifier's sampling log-probabilities (temperature, top-p, renormalized), per
    position the `top` most likely and the sequence's own, computed in vLLM's worker
    (harness/engine/sampling_logits.py). Where the worker cannot take the hook (a multi-process
    engine refuses to pickle it without VLLM_ALLOW_INSECURE_SERIALIZATION, or the runner calls
    another object), the whole vocabulary is re-scored and reduced here, in the host."""
    from functools import partial

    from harness.engine import sampling_logits

    try:
        llm.apply_model(partial(sampling_logits.install, temperature=temperature, top_p=top_p))
    except Exception as e:  # noqa: BLE001 - the whole-vocabulary path still answers
        return _rescore_sampling_whole(llm, sequences, temperature, top_p, top, f"{type(e).__name__}: {e}")
    try:
        dists = rescore(llm, sequences, top)
    finally:
        calls = sum(llm.apply_model(sampling_logits.remove))
    if calls == 0:
        return _rescore_sampling_whole(
            llm, sequences, temperature, top_p, top, "the runner never called the hooked compute_logits"
        )
    return SamplingRescore(dists, RESCORE_IN_ENGINE)


def _rescore_sampling_whole(
    llm, sequences: list[tuple[list[int], int]], temperature: float, top_p: float, top: int, why: str
) -> SamplingRescore:
    from harness.analysis.lossless_sampling import kept_at, processed

    dists = [
        [
            kept_at(processed(dist, temperature, top_p), tok, top)
            for tok, dist in zip(ids[max(start, 1) :], raw, strict=True)
        ]
        for (ids, start), raw in zip(sequences, rescore(llm, sequences, None), strict=True)
    ]
    return SamplingRescore(dists, f"{RESCORE_WHOLE_VOCABULARY} in the engine host ({why[:200]})")
