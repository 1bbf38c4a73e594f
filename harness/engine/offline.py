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
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import tempfile
import threading
import time
import traceback
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

from harness.engine.base import (
    RESCORE_IN_ENGINE,
    RESCORE_WHOLE_VOCABULARY,
    Arrivals,
    BatchResult,
    GenOutput,
    GenRequest,
    LayerStateReader,
    Rescorer,
    Sampling,
    SamplingRescore,
    SamplingRescorer,
    track,
)
from harness.engine.counters import SpecCounters, SpecSummary, counters_from_offline
from harness.engine.logs import failing_checkpoint, tail
from harness.engine.ownership import die_with_parent, start_watchdog
from harness.engine.settings import SINGLE_PROCESS_ENV, EnginePlan, single_process
from harness.errors import BadInput, InfraError


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


def _run_batch(
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


def _layer_states(llm, token_ids: list[int], layer_ids: list[int]) -> dict[int, Any]:
    """vLLM's residual stream entering `layer_ids` for one prefill of `token_ids`."""
    from functools import partial

    from harness.engine import probe

    llm.apply_model(partial(probe.install, layer_ids=list(layer_ids)))
    try:
        _run_batch(llm, [GenRequest("probe", tuple(token_ids), 1)], Sampling(), 1, 600)
    finally:
        states = llm.apply_model(probe.collect)[0]
    return states


def _rescore(llm, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
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


def _rescore_sampling(
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
        dists = _rescore(llm, sequences, top)
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
        for (ids, start), raw in zip(sequences, _rescore(llm, sequences, None), strict=True)
    ]
    return SamplingRescore(dists, f"{RESCORE_WHOLE_VOCABULARY} in the engine host ({why[:200]})")


def _threads_like_vllms_cpu_worker() -> None:
    """Give this process the OpenMP threads vLLM's `mp` executor gives its one CPU worker (auto
    binding, vllm/utils/ompmultiprocessing.py): the first NUMA node's cores, one logical CPU per
    physical core, less the last one (reserved there for the engine-core process). Same thread
    count, same reduction order: the single-process engine computes what vLLM's own layout does
    (2 threads instead of 1 changed the stand-in's greedy tokens at bf16 near-ties)."""
    import torch
    from vllm.utils import cpu_resource_utils as cr

    cpus = cr.get_allowed_cpu_list()
    node = min(c.numa_node for c in cpus)
    per_core: dict[int, int] = {}
    for c in sorted(cpus, key=lambda c: c.id):
        if c.numa_node == node:
            per_core[c.physical_core] = c.id  # x86: the core's last logical CPU
    cores = sorted(per_core.values())
    cores = cores[:-1] if len(cores) > 1 else cores
    os.sched_setaffinity(0, cores)
    os.environ["OMP_NUM_THREADS"] = str(len(cores))
    torch.set_num_threads(len(cores))


def _guard_kernel_rebind() -> None:
    """vLLM-CPU 0.32 rebinds its Triton kernel overrides by scanning every loaded module; in a
    single-process engine that includes llvmlite's FFI wrapper, whose attribute hook answers
    `__dict__` with a function and stops the scan (AttributeError: '_lib_fn_wrapper' object has
    no attribute 'get'; docs/facts.md §3). The scan only looks for vLLM's own kernels, so
    llvmlite's modules are hidden from it while it runs."""
    import sys

    from vllm.triton_utils import dispatcher

    original = dispatcher._rebind_kernels
    if getattr(original, "_harness_guarded", False):
        return

    def rebind(overrides):
        hidden = {n: m for n, m in list(sys.modules.items()) if n == "llvmlite" or n.startswith("llvmlite.")}
        for name in hidden:
            del sys.modules[name]
        try:
            return original(overrides)
        finally:
            sys.modules.update(hidden)

    rebind._harness_guarded = True  # type: ignore[attr-defined]  # a marker on the function object
    dispatcher._rebind_kernels = rebind


def _shutdown(llm) -> None:
    """Stop vLLM's engine-core process explicitly: a multiprocessing child exits through
    os._exit, which skips the atexit hooks vLLM relies on, and would orphan it."""
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:  # noqa: BLE001 - the parent kills the process group anyway
        pass


def _import_vllm_quietly() -> None:
    """Import vLLM (~11 s of one core) before the first engine is asked for, so a host spawned
    ahead of time (prespawn) opens its engine in the time the engine itself takes. vLLM's import
    chatter would reach the harness's terminal: it goes nowhere until an engine's log takes over,
    and an import failure surfaces, with its traceback in that log, when the engine opens."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        from vllm import LLM  # noqa: F401
    except BaseException:  # noqa: BLE001 - reported by the engine's own start
        pass


# ----------------------------------------------------------------------------- the host's pipe
# The harness sends a host one message at a time and waits for its one reply (_Exit has none).
# A host without an engine takes _Open (-> _Ready, or _Failed and the host ends) or _Exit; a host
# with one takes _Generate, _Rescore, _RescoreSampling, _LayerStates, _Counters (-> _Ok or _Failed) and _Close
# (-> _Closed: the engine is shut down, the host free again). `what` names the request in the
# harness's error messages.


@dataclass(frozen=True)
class _Open:
    what: ClassVar[str] = "start"
    plan: EnginePlan
    timeout_s: float  # the default per-request timeout of the engine's batches
    log_path: str


@dataclass(frozen=True)
class _Exit:
    what: ClassVar[str] = "exit"


@dataclass(frozen=True)
class _Generate:
    what: ClassVar[str] = "generate"
    requests: list[GenRequest]
    sampling: Sampling
    concurrency: int
    timeout_s: float | None  # None: the engine's


@dataclass(frozen=True)
class _Rescore:
    what: ClassVar[str] = "rescore"
    sequences: list[tuple[list[int], int]]
    top: int | None = None


@dataclass(frozen=True)
class _RescoreSampling:
    what: ClassVar[str] = "rescore"
    sequences: list[tuple[list[int], int]]
    temperature: float
    top_p: float
    top: int


@dataclass(frozen=True)
class _LayerStates:
    what: ClassVar[str] = "layer_states"
    token_ids: list[int]
    layer_ids: list[int]


@dataclass(frozen=True)
class _Counters:
    what: ClassVar[str] = "counters"


@dataclass(frozen=True)
class _Close:
    what: ClassVar[str] = "close"


@dataclass(frozen=True)
class _Ready:
    info: dict[str, Any]  # what describe() adds, e.g. vllm_version


@dataclass(frozen=True)
class _Ok:
    value: Any


@dataclass(frozen=True)
class _Failed:
    error: str  # "ExceptionType: message"
    traceback: str  # its last 4000 characters


@dataclass(frozen=True)
class _Closed:
    pass


def _failed(e: BaseException) -> _Failed:
    return _Failed(f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:])


def _host(conn, env: dict[str, str], probe: bool) -> None:  # runs in the child
    # Own process group: the parent can stop this child and vLLM's processes below it, and only them.
    os.setpgrp()
    # Die with the harness however it dies: this child by the kernel's parent-death signal, vLLM's
    # processes below it by a watchdog in the group (harness/engine/ownership.py).
    harness_pid = os.getppid()
    die_with_parent()
    if os.getppid() != harness_pid:  # the harness died before the signal was armed
        return
    start_watchdog(os.getpgrp(), harness_pid)
    os.environ.update(env)
    single = env.get(SINGLE_PROCESS_ENV[0]) == SINGLE_PROCESS_ENV[1]  # so is every engine of this host
    if single:
        _threads_like_vllms_cpu_worker()
    if probe:
        # apply_model ships our probe functions to vLLM's worker, which needs pickle; the
        # processes are this engine's own, on this machine.
        os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    _import_vllm_quietly()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if not isinstance(msg, _Open):  # _Exit
            return
        plan = msg.plan
        # vLLM logs to stdout; the harness keeps stdout for its tables and each engine's log in
        # a file (its engine-core and worker processes inherit these descriptors).
        fd = os.open(msg.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        try:
            from vllm import LLM

            if single:
                _guard_kernel_rebind()
            llm = LLM(model=plan.model, **plan.engine_kwargs)
        except BaseException as e:  # noqa: BLE001 - report any start failure to the parent
            conn.send(_failed(e))
            return  # a failed start may leave state behind: this host is not reused
        conn.send(_Ready({"vllm_version": __import__("vllm").__version__}))
        try:
            _serve(conn, llm, msg.timeout_s)
        finally:
            _shutdown(llm)
            del llm
            import gc

            gc.collect()
        conn.send(_Closed())


def _serve(conn, llm, timeout_s: float) -> None:
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        try:
            match msg:
                case _Generate():
                    conn.send(
                        _Ok(_run_batch(llm, msg.requests, msg.sampling, msg.concurrency, msg.timeout_s or timeout_s))
                    )
                case _Rescore():
                    conn.send(_Ok(_rescore(llm, msg.sequences, msg.top)))
                case _RescoreSampling():
                    conn.send(_Ok(_rescore_sampling(llm, msg.sequences, msg.temperature, msg.top_p, msg.top)))
                case _LayerStates():
                    conn.send(_Ok(_layer_states(llm, msg.token_ids, msg.layer_ids)))
                case _Counters():
                    conn.send(_Ok(counters_from_offline(llm.get_metrics())))
                case _Close():
                    return
        except BaseException as e:  # noqa: BLE001
            conn.send(_failed(e))


class _HostProcess:
    """A spawned child that imports vLLM once and hosts one engine at a time."""

    def __init__(self, env: dict[str, str], probe: bool):
        ctx = mp.get_context("spawn")
        _register_shutdown()
        self.conn, child = ctx.Pipe()
        # Not a daemon: vLLM starts its own engine-core process from this child.
        self.proc = ctx.Process(target=_host, args=(child, env, probe), daemon=False)
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
            host.conn.send(_Exit())
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
            self._conn.send(_Open(plan, request_timeout_s, str(log_path)))
            msg = self._recv(startup_timeout_s, _Open.what)
        except BaseException:  # Ctrl-C or a timeout while starting: stop what was started
            self.close()
            raise
        if not isinstance(msg, _Ready):  # _Failed
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
        request: _Generate | _Rescore | _RescoreSampling | _LayerStates | _Counters,
        timeout_s: float = 24 * 3600,
    ):
        self._conn.send(request)
        reply = self._recv(timeout_s, request.what)
        if isinstance(reply, _Failed):
            raise InfraError(f"vLLM engine failed in {request.what}: {reply.error}")
        return reply.value

    def counters(self) -> tuple[SpecCounters, dict[str, float]]:
        return self._call(_Counters())

    def rescore(self, sequences: list[tuple[list[int], int]], top: int | None = None) -> list[list[dict[int, float]]]:
        """Per sequence, from position `start` on: the verifier's raw logprob of every vocabulary
        token (or of the `top` most likely and the sequence's own) given the tokens before it (the
        engine needs max_logprobs = -1)."""
        return self._call(_Rescore([(list(ids), int(start)) for ids, start in sequences], top))

    def rescore_sampling(
        self, sequences: list[tuple[list[int], int]], temperature: float, top_p: float, top: int
    ) -> SamplingRescore:
        """Per sequence, from position `start` on: the verifier's sampling logprobs (temperature,
        top-p, renormalized) of its `top` most likely tokens and the sequence's own, computed in
        vLLM's worker; `path` says where (harness/engine/sampling_logits.py)."""
        seqs = [(list(ids), int(start)) for ids, start in sequences]
        return self._call(_RescoreSampling(seqs, float(temperature), float(top_p), int(top)))

    def layer_states(self, token_ids: list[int], layer_ids: list[int]) -> dict[int, Any]:
        """vLLM's own residual stream entering each of `layer_ids` (aux-id semantics), [T, H]."""
        return self._call(_LayerStates(list(token_ids), list(layer_ids)))

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
        outputs = self._call(_Generate(requests, sampling, concurrency, timeout_s))
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
                self._conn.send(_Close())
                if self._conn.poll(60):
                    reusable = isinstance(self._conn.recv(), _Closed)
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
