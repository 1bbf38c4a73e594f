"""vLLM's in-process engine (`vllm.LLM`), hosted in a child process.

Why a child: vLLM reads environment switches (VLLM_MLA_DISABLE, VLLM_CPU_KVCACHE_SPACE) at
config time and may cache them, and an in-process engine cuts torch to one thread for the rest
of its process (docs/facts.md §7). A child gets its own environment and threads, dies cleanly, and
keeps vLLM out of the harness process. The child drives `LLMEngine.add_request/step` itself
so that at most `concurrency` requests are in flight and every token's arrival is timed.

A host child imports vLLM once and then hosts one engine after another (a bench starts one
engine per k): closing an engine shuts its engine core down and returns the host to a pool,
keyed by environment, for the next engine. This saves the ~6 s import per engine; a host that
misbehaves is killed with its whole process group and never reused.

On CPU with one worker (`EnginePlan.single_process`) the host also runs vLLM's engine core and
worker in its own process (VLLM_ENABLE_V1_MULTIPROCESSING=0, the `uni` executor) instead of
spawning two more that each import vLLM again: an engine starts in ~4 s instead of ~16, and an
idle engine (the baseline while the draft's cells run) sleeps on its pipe instead of polling
vLLM's shared-memory queue on the cores the measured engine runs on. Both arms of a cell run
the same way, so speedups stay like for like; the plan's `workarounds` record it per engine.

This module is the harness's side: `OfflineEngine` and the pool of hosts. The child is
harness/engine/offline_host.py, the messages between them harness/engine/offline_protocol.py, and
what the child does with its `vllm.LLM` harness/engine/offline_calls.py.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from harness.engine.base import (
    Arrivals,
    BatchResult,
    GenRequest,
    LayerStateReader,
    Rescorer,
    Sampling,
    SamplingRescore,
    SamplingRescorer,
    track,
)
from harness.engine.counters import SpecCounters
from harness.engine.logs import failing_checkpoint, tail
from harness.engine.offline_host import host
from harness.engine.offline_protocol import (
    Close,
    Closed,
    Counters,
    Exit,
    Failed,
    Generate,
    LayerStates,
    Open,
    Ready,
    Rescore,
    RescoreSampling,
)
from harness.engine.settings import EnginePlan, single_process
from harness.errors import BadInput, InfraError


class _HostProcess:
    """A spawned child that imports vLLM once and hosts one engine at a time."""

    def __init__(self, env: dict[str, str], probe: bool):
        ctx = mp.get_context("spawn")
        _register_shutdown()
        self.conn, child = ctx.Pipe()
        # Not a daemon: vLLM starts its own engine-core process from this child.
        self.proc = ctx.Process(target=host, args=(child, env, probe), daemon=False)
        self.proc.start()
        child.close()
        self.key = (tuple(sorted(env.items())), probe)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        import contextlib
        import signal

        with contextlib.suppress(ProcessLookupError, PermissionError):
            # the process was started in __init__, so it has a pid
            os.killpg(cast(int, self.proc.pid), signal.SIGTERM)
            time.sleep(1)
            os.killpg(cast(int, self.proc.pid), signal.SIGKILL)
        self.proc.join(10)
        self.conn.close()


_IDLE: list[_HostProcess] = []


_IDLE_LOCK = threading.Lock()  # two engines may start side by side (harness/engine/background_start.py)


def _acquire(env: dict[str, str], probe: bool) -> _HostProcess:
    key = (tuple(sorted(env.items())), probe)
    with _IDLE_LOCK:
        while _IDLE:
            host = _IDLE.pop()
            if host.key == key and host.alive():
                return host
            host.kill()
    return _HostProcess(env, probe)


def prespawn(plan: EnginePlan, count: int) -> None:
    """Have `count` idle hosts for `plan` ready or starting: a run that keeps its baseline engine
    up while a speculative one starts needs two, and the second imports vLLM (~11 s of one core)
    while the first engine starts and warms up, instead of after."""
    env = single_process(plan).env
    key = (tuple(sorted(env.items())), False)
    for _ in range(count - sum(h.key == key and h.alive() for h in _IDLE)):
        _IDLE.insert(0, _HostProcess(env, False))


def shutdown_hosts() -> None:
    """Stop every engine and every idle host (also done at exit)."""
    from harness.engine.base import close_live

    close_live()
    while _IDLE:
        host = _IDLE.pop()
        try:
            host.conn.send(Exit())
            # a ready host exits at once; one still importing vLLM (prespawned for a run that then
            # refused its input) would read the pipe only after the import: it holds no engine, so
            # it is killed instead of waited for (a refused bench exits in seconds, not ~20)
            host.proc.join(0.5)
        except (OSError, BrokenPipeError):
            pass
        host.kill()


_REGISTERED: list[bool] = []


def _register_shutdown() -> None:
    """Stop the hosts at exit, before multiprocessing's own exit hook joins its non-daemon
    children (it would wait forever on an idle host): atexit runs hooks last-registered first,
    so this registers once multiprocessing is imported, at the first host's start."""
    if not _REGISTERED:
        import multiprocessing.util  # noqa: F401 - its exit hook is registered on import

        atexit.register(shutdown_hosts)
        _REGISTERED.append(True)


class OfflineEngine(Rescorer, SamplingRescorer, LayerStateReader):
    """An `Engine` that is also a `Rescorer`, a `SamplingRescorer` and a `LayerStateReader`
    (harness/engine/base.py);
    `layer_states` needs the engine started with probe=True."""

    kind = "offline"

    def __init__(
        self,
        plan: EnginePlan,
        startup_timeout_s: float = 600,
        request_timeout_s: float = 600,
        probe: bool = False,
        log_path: Path | None = None,
    ):
        plan = single_process(plan)
        self.plan = plan
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="harness-engine-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self._host = _acquire(plan.env, probe)
        self._conn, self._proc = self._host.conn, self._host.proc
        track(self)
        t0 = time.perf_counter()
        try:
            self._conn.send(Open(plan, request_timeout_s, str(log_path)))
            msg = self._recv(startup_timeout_s, Open.what)
        except BaseException:  # Ctrl-C or a timeout while starting: stop what was started
            self.close()
            raise
        if not isinstance(msg, Ready):  # Failed
            self.close()
            draft = plan.speculative.draft if plan.speculative else None
            raise InfraError(
                f"vLLM engine failed to start for {failing_checkpoint(log_path, plan.model, draft, msg.traceback)}: "
                f"{msg.error}; last lines of "
                f"{log_path}:\n{tail(log_path)}"
            )
        self.info = {**msg.info, "startup_s": round(time.perf_counter() - t0, 1)}

    def _recv(self, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while not self._conn.poll(1.0):
            if not self._proc.is_alive():
                raise InfraError(
                    f"vLLM engine process died during {what} (exit code {self._proc.exitcode}); "
                    f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            if time.monotonic() > deadline:
                self.close()
                raise InfraError(f"vLLM engine did not {what} within {timeout_s:.0f}s")
        try:
            return self._conn.recv()
        except EOFError as e:
            raise InfraError(f"vLLM engine process closed its pipe during {what}") from e

    def _call(
        self,
        request: Generate | Rescore | RescoreSampling | LayerStates | Counters,
        timeout_s: float = 24 * 3600,
    ):
        self._conn.send(request)
        reply = self._recv(timeout_s, request.what)
        if isinstance(reply, Failed):
            raise InfraError(f"vLLM engine failed in {request.what}: {reply.error}")
        return reply.value

    def counters(self) -> tuple[SpecCounters, dict[str, float]]:
        return self._call(Counters())

    def rescore(self, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
        """Per sequence, from position `start` on: the verifier's raw logprob of every vocabulary
        token (or of the `top` most likely and the sequence's own) given the tokens before it (the
        engine needs max_logprobs = -1)."""
        return self._call(Rescore([(list(ids), int(start)) for ids, start in sequences], top))

    def rescore_sampling(
        self, sequences: list[tuple[list[int], int]], temperature: float, top_p: float, top: int
    ) -> SamplingRescore:
        """Per sequence, from position `start` on: the verifier's sampling logprobs (temperature,
        top-p, renormalized) of its `top` most likely tokens and the sequence's own, computed in
        vLLM's worker; `path` says where (harness/engine/sampling_logits.py)."""
        seqs = [(list(ids), int(start)) for ids, start in sequences]
        return self._call(RescoreSampling(seqs, float(temperature), float(top_p), int(top)))

    def layer_states(self, token_ids: list[int], layer_ids: list[int]) -> dict[int, Any]:
        """vLLM's own residual stream entering each of `layer_ids` (aux-id semantics), [T, H]."""
        return self._call(LayerStates(list(token_ids), list(layer_ids)))

    def generate(
        self,
        requests: list[GenRequest],
        sampling: Sampling,
        concurrency: int,
        timeout_s: float | None = None,
        arrivals: Arrivals | None = None,
    ) -> BatchResult:
        if arrivals is not None:  # the recipe refuses request_rate with the offline engine
            raise BadInput("open-loop arrivals need a server engine (bench.engine = 'server')")
        before, tb = self.counters()
        t0 = time.perf_counter()
        outputs = self._call(Generate(requests, sampling, concurrency, timeout_s))
        wall = time.perf_counter() - t0
        after, ta = self.counters()
        return BatchResult(outputs, wall, after - before, **BatchResult.deltas(tb, ta))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.plan.model,
            "log": str(self.log_path),
            "engine_kwargs": self.plan.engine_kwargs,
            "env": self.plan.env,
            "workarounds": list(self.plan.workarounds),
            "speculative": asdict(self.plan.speculative) if self.plan.speculative else None,
            **self.info,
        }

    def close(self, reuse: bool = True) -> None:
        """Shut the engine down; a healthy host goes back to the pool, any other is killed
        (so is every host when closing after an error or Ctrl-C: that must be quick)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        reusable = False
        if reuse and self._proc.is_alive() and getattr(self, "info", None) is not None:
            try:
                self._conn.send(Close())
                if self._conn.poll(60):
                    reusable = isinstance(self._conn.recv(), Closed)
            except (OSError, BrokenPipeError, EOFError):
                reusable = False
        if reusable and self._proc.is_alive():
            _IDLE.append(self._host)
        else:
            self._host.kill()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(reuse=exc_type is None)
