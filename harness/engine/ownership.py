"""Engine processes die with the harness, whatever kills it (docs/architecture.md, "Engines run
in child processes").

Two mechanisms, because neither is enough alone:
  - a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG)`) on a direct child: the kernel
    signals it the moment its parent dies, SIGKILL of the parent included. It does not reach
    grandchildren (vLLM's EngineCore and workers), and it fires when the *thread* that started
    the child exits, so it is only armed for children started from the main thread.
  - a watchdog: a tiny process (the standard library and psutil) that joins the engine's process
    group and polls the harness; when the harness is gone it stops the whole group (itself
    included). Because it lives in the group, stopping the group the ordinary way (engine close)
    stops it too.

This file runs as a script for the watchdog (`python ownership.py HARNESS_PID START_TICKS`), so
it imports nothing from the harness. Process readings are psutil's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import psutil

_PR_SET_PDEATHSIG = 1
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
POLL_S = 0.5  # how often the watchdog looks at the harness
GRACE_S = 2.0  # between SIGTERM and SIGKILL of the group: vLLM's servers shut down cleanly in it


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux's /proc/PID/stat starttime, from
    psutil's creation time): with the pid it identifies one process, so a reused pid is not
    mistaken for the original. None when it is gone or a zombie (it has already died)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return round((proc.create_time() - psutil.boot_time()) * _CLOCK_TICKS)
    except psutil.Error:
        return None


def process_alive(pid: int, ticks: int | None = None) -> bool:
    """Is process `pid` (started at `ticks`, when known) still running (not a zombie)?"""
    now = start_ticks(pid)
    if now is None:
        return False
    return ticks is None or now == ticks


def _prctl():
    """libc's prctl, or None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; elsewhere a
    no-op). It survives exec."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def child_preexec(sig: int = signal.SIGTERM):
    """A `Popen(preexec_fn=...)` arming the parent-death signal in the child, or None where it
    would misfire (a child started from a worker thread is signalled when that thread ends).
    libc is looked up here, in the parent: between fork and exec the child only makes the call."""
    prctl = _prctl()
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def start_watchdog(pgid: int, harness_pid: int | None = None) -> subprocess.Popen:
    """A watchdog in process group `pgid` (an existing group of this session) that stops the
    group when `harness_pid` (default: this process) dies."""
    pid = os.getpid() if harness_pid is None else harness_pid
    # -I without -S: psutil is in site-packages (about 50 ms and 5 MB more than a bare interpreter)
    cmd = [sys.executable, "-I", os.path.abspath(__file__), str(pid), str(start_ticks(pid) or 0)]
    return subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        process_group=pgid,
        close_fds=True,
    )


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    out = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                out.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):  # ended since it was listed
            continue
    return out


def stop_group(pgid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM the group, then SIGKILL what is left after `grace_s` (no error if it is gone).
    Zombies (exited children not yet reaped) count as gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


def _watch(harness_pid: int, ticks: int) -> None:  # runs in the watchdog process
    # Not the harness's terminal signals: the watchdog outlives a Ctrl-C'd harness by design.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    while process_alive(harness_pid, ticks or None):
        time.sleep(POLL_S)
    pgid = os.getpgrp()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)  # ignored here, obeyed by the engine
        time.sleep(GRACE_S)
        os.killpg(pgid, signal.SIGKILL)  # the rest of the group, this watchdog included


if __name__ == "__main__":
    _watch(int(sys.argv[1]), int(sys.argv[2]))
