"""The pipe between the harness and an offline engine's host child (harness/engine/offline.py's
client, harness/engine/offline_host.py's child): one message at a time, one reply each.

A host without an engine takes Open (-> Ready, or Failed and the host ends) or Exit (no reply); a
host with one takes Generate, Rescore, RescoreSampling, LayerStates, Counters (-> Ok or Failed) and
Close (-> Closed: the engine is shut down, the host free again). `what` names the request in the
harness's error messages."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.engine.base import GenRequest, Sampling
from harness.engine.settings import EnginePlan


@dataclass(frozen=True)
class Open:
    what: ClassVar[str] = "start"
    plan: EnginePlan
    timeout_s: float  # the default per-request timeout of the engine's batches
    log_path: str


@dataclass(frozen=True)
class Exit:
    what: ClassVar[str] = "exit"


@dataclass(frozen=True)
class Generate:
    what: ClassVar[str] = "generate"
    requests: list[GenRequest]
    sampling: Sampling
    concurrency: int
    timeout_s: float | None  # None: the engine's


@dataclass(frozen=True)
class Rescore:
    what: ClassVar[str] = "rescore"
    sequences: list[tuple[list[int], int]]
    top: int | None = None


@dataclass(frozen=True)
class RescoreSampling:
    what: ClassVar[str] = "rescore"
    sequences: list[tuple[list[int], int]]
    temperature: float
    top_p: float
    top: int


@dataclass(frozen=True)
class LayerStates:
    what: ClassVar[str] = "layer_states"
    token_ids: list[int]
    layer_ids: list[int]


@dataclass(frozen=True)
class Counters:
    what: ClassVar[str] = "counters"


@dataclass(frozen=True)
class Close:
    what: ClassVar[str] = "close"


@dataclass(frozen=True)
class Ready:
    info: dict[str, Any]  # what describe() adds, e.g. vllm_version


@dataclass(frozen=True)
class Ok:
    value: Any


@dataclass(frozen=True)
class Failed:
    error: str  # "ExceptionType: message"
    traceback: str  # its last 4000 characters


@dataclass(frozen=True)
class Closed:
    pass


def failed(e: BaseException) -> Failed:
    return Failed(f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:])
