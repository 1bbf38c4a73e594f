"""Read the machine's and the run's own busy CPU time with psutil, for the machine check's
foreign-CPU share (harness/analysis/machine.py)."""

from __future__ import annotations

import os
import time

import psutil

from harness.analysis.machine import CpuTimes

# the machine's busy time, as /proc/stat's user nice system irq softirq steal (idle and iowait are
# not busy; guest time is already inside user and nice). Fields a platform lacks read 0.
_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")


def _own_seconds(root: int) -> float:
    """user + system + reaped children's user + system of `root` and every process below it
    (children that ended and were reaped are in their parent's children times, so an engine
    restart loses nothing)."""
    try:
        top = psutil.Process(root)
        tree = [top, *top.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in tree:
        try:
            c = p.cpu_times()
        except psutil.Error:  # ended since it was listed
            continue
        total += c.user + c.system + c.children_user + c.children_system
    return total


def read_ticks(root: int | None = None) -> CpuTimes | None:
    """The machine's and `root`'s process tree's busy CPU seconds now (root: this process); None
    where psutil cannot read them."""
    t = time.monotonic()
    try:
        machine = psutil.cpu_times()
    except (psutil.Error, OSError, NotImplementedError):
        return None
    busy = sum(getattr(machine, f, 0.0) for f in _BUSY)
    own = _own_seconds(os.getpid() if root is None else root)
    return CpuTimes(t, busy, own, psutil.cpu_count() or 1)
