"""Read the machine's and the run's own busy CPU time with psutil, for the machine check's
foreign-CPU share (harness/analysis/machine.py).

"The machine" is the cores this process may run on (its affinity: taskset, a container's cpuset, a
test worker's share), not every core of the host: a neighbour pinned to other cores does not take
the run's CPU time, and counting it would flag every cell on a shared host. What it can still move
(memory bandwidth, shared cache) the sentinel's timings see."""

from __future__ import annotations

import os
import time

import psutil

from harness.analysis.machine import CpuTimes
from harness.engine.settings import allowed_cpus

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
    """The busy CPU seconds of the cores this process may use and of `root`'s process tree now
    (root: this process); None where psutil cannot read them."""
    t = time.monotonic()
    try:
        per_core = psutil.cpu_times(percpu=True)
    except (psutil.Error, OSError, NotImplementedError):
        return None
    cores = [c for c in allowed_cpus() if c < len(per_core)] or list(range(len(per_core)))
    busy = sum(getattr(per_core[c], f, 0.0) for c in cores for f in _BUSY)
    own = _own_seconds(os.getpid() if root is None else root)
    return CpuTimes(t, busy, own, max(1, len(cores)))
