"""The one small interface every engine implements, and the values it trades in.

Engines (all real vLLM):
  - `OfflineEngine`: vLLM's `LLM` in a child process (its own environment and threads; the
    harness process never imports vLLM).
  - `ServerEngine`: a vLLM OpenAI server the harness starts on 127.0.0.1 and stops.
  - `AttachedEngine`: an already running server, by URL (production).

Contract of `generate(requests, sampling, concurrency)`: every request is attempted; at most
`concurrency` are in flight at once; a request that fails or takes longer than `timeout_s`
(default: the engine's) comes back with `error` set (the batch still returns); outputs come back in
request order. `counters()` reads vLLM's cumulative speculative-decoding counters (callers take deltas).

Capabilities beyond `Engine`, each a protocol of its own (`isinstance(engine, Rescorer)`):

  protocol           method                          OfflineEngine  ServerEngine  AttachedEngine
  Engine             generate/counters/describe/close     yes           yes           yes
  Rescorer           rescore(sequences, top)               yes           yes           yes
  SamplingRescorer   rescore_sampling(seqs, T, top_p, top) yes           no            no
  LayerStateReader   layer_states(token_ids, layer_ids)    yes           no            no

`rescore` is vLLM's `prompt_logprobs` (in process, or the completions API's `prompt_logprobs`
field on a server started with --max-logprobs -1); `rescore_sampling` applies temperature and
top-p in vLLM's worker before prompt_logprobs' top-N (harness/engine/sampling_logits.py), and
`layer_states` is a probe in the worker (`OfflineEngine(probe=True)`): a server exposes neither.
The bench re-scores T > 0 outputs when its baseline engine is a Rescorer (harness/bench/lossless_probes.py
rescored_arms; at T != 1 or top-p < 1 a Rescorer that is no SamplingRescorer ships the whole
vocabulary per position); the agreement check reads layer states (harness/train/agree.py
layer_differences).
The protocols are runtime-checkable: isinstance looks for the method (statically, on the class
or the instance, from Python 3.12 on: a wrapper that forwards it through __getattr__ is no
Rescorer there; define the method, or subclass the protocol as OfflineEngine does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

from harness.engine.counters import GENERATION, PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES, SpecCounters, SpecSummary


@dataclass(frozen=True)
class GenRequest:
    request_id: str
    prompt_token_ids: tuple[int, ...]  # already templated and tokenized: identical for every arm
    max_tokens: int
    # vLLM's per-request prefix-cache salt: blocks are reused only between requests of the same
    # salt, so a fresh salt per request is prefix caching off for that request (bench.prefix_caching)
    cache_salt: str | None = None


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()
    # Return the top-N logprobs of every output token (None: none, as before). vLLM adds the
    # sampled token's when it is not among the N; what they are (raw or after temperature)
    # is the engine's `logprobs_mode`.
    logprobs: int | None = None


@dataclass(frozen=True)
class Arrivals:
    """An open-loop arrival schedule (bench.request_rate): `rate` requests/s, gamma-distributed gaps
    of shape `burstiness` (1: Poisson), drawn by vLLM's benchmark client from numpy's global
    generator seeded with `seed` right before the batch, so every arm gets the same schedule."""

    rate: float
    burstiness: float = 1.0
    seed: int = 0


@dataclass
class GenOutput:
    request_id: str
    prompt_len: int
    output_token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)  # per streamed chunk after the first (vLLM's ITL)
    itl_tokens: list[int] = field(default_factory=list)  # tokens each of those chunks carried
    latency_s: float | None = None
    sent_s: float | None = None  # sent (open loop: scheduled to arrive), from the batch's first
    queue_s: float | None = None  # open loop: from arrival to a slot under the concurrency cap (in ttft/latency)
    error: str | None = None
    # vLLM's per-request speculative-decoding summary; None without speculation
    spec: SpecSummary | None = None
    # per output token: token id -> logprob (top-N + the sampled token), when Sampling.logprobs
    logprobs: list[dict[int, float]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class BatchResult:
    outputs: list[GenOutput]
    wall_s: float
    counters: SpecCounters  # delta over the batch
    generation_tokens: float | None = None  # vLLM's own count over the batch (foreign traffic check)
    # vLLM's prefix-cache counters over the batch, in prompt tokens: (looked up, found cached)
    prefix_cache: tuple[float, float] | None = None

    @staticmethod
    def deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """The BatchResult fields read from two snapshots of an engine's other totals (counters())."""

        def d(name: str) -> float | None:
            return after.get(name, 0) - before.get(name, 0) if name in after else None

        queries, hits = d(PREFIX_CACHE_QUERIES), d(PREFIX_CACHE_HITS)
        return {
            "generation_tokens": d(GENERATION),
            "prefix_cache": (queries, hits) if queries is not None and hits is not None else None,
        }

    @property
    def num_output_tokens(self) -> int:
        return sum(len(o.output_token_ids) for o in self.outputs if o.ok)


class Engine(Protocol):
    kind: str

    def generate(
        self,
        requests: list[GenRequest],
        sampling: Sampling,
        concurrency: int,
        timeout_s: float | None = None,
        arrivals: Arrivals | None = None,
    ) -> BatchResult: ...

    def counters(self) -> tuple[SpecCounters, dict[str, float]]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...

    # the bench holds each engine in a `with` block (close on exit)
    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Any: ...


@runtime_checkable
class Rescorer(Protocol):
    """An engine that re-scores token sequences: the verifier's log-probabilities over its whole
    vocabulary (OfflineEngine in-process, the servers through prompt_logprobs; the engine needs
    max_logprobs = -1)."""

    def rescore(self, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
        """Per (token ids, start): from position `start` on, {token id: logprob} over the
        vocabulary for each position given the tokens before it; with `top`, only the `top` most
        likely tokens and the sequence's own token (raw logprobs, not renormalized)."""
        ...


# How a T > 0 re-score got the verifier's sampling distribution (the rows' `sampling_rescore`).
RESCORE_IN_ENGINE = "in-engine"  # processed in vLLM's worker, top N + the token returned
RESCORE_RAW_TOP = "raw top-N"  # T = 1 without top-p: the raw top N + the token are the sampling ones
RESCORE_WHOLE_VOCABULARY = "whole vocabulary"  # every position's V logprobs, processed outside vLLM


@dataclass(frozen=True)
class SamplingRescore:
    # per sequence, per position from `start`: {token id: sampling logprob}, top N + the token's own
    dists: list[list[dict[int, float]]]
    path: str  # RESCORE_IN_ENGINE, or why not (RESCORE_WHOLE_VOCABULARY ...)


@runtime_checkable
class SamplingRescorer(Protocol):
    """An engine that re-scores token sequences with the verifier's *sampling* distribution
    (temperature, top-p, renormalized) computed where the logits are, returning a few numbers
    per position instead of the vocabulary (OfflineEngine: harness/engine/sampling_logits.py)."""

    def rescore_sampling(
        self, sequences: list[tuple[list[int], int]], temperature: float, top_p: float, top: int
    ) -> SamplingRescore:
        """Per (token ids, start): from position `start` on, the sampling logprobs of the `top`
        most likely tokens and of the sequence's own token (-inf: cut by top-p)."""
        ...


@runtime_checkable
class LayerStateReader(Protocol):
    """An engine that reads its own residual stream entering given decoder layers (OfflineEngine
    started with probe=True)."""

    def layer_states(self, token_ids: list[int], layer_ids: list[int]) -> dict[int, Any]:
        """layer id -> the [T, H] hidden states entering that layer for one prefill of `token_ids`."""
        ...


# Engines own processes; whatever happens to the caller (a failed assertion, Ctrl-C, an
# exception between start and `with`), none may outlive the harness process.
_LIVE: weakref.WeakSet[Any]


def close_live() -> None:
    for eng in list(_LIVE):
        try:
            eng.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def track(engine: Any) -> None:
    """Close `engine` at interpreter exit if nobody closed it before."""
    _LIVE.add(engine)


import atexit  # noqa: E402
import weakref  # noqa: E402

_LIVE = weakref.WeakSet()
atexit.register(close_live)
