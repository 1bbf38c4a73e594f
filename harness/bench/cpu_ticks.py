"""Read the machine's and the run's own busy CPU ticks from /proc (Linux), for the machine check's
foreign-CPU share (harness/analysis/machine.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness.analysis.machine import CpuTicks
from harness.engine.ownership import stat_fields

_BUSY = (0, 1, 2, 5, 6, 7)  # /proc/stat cpu fields: user nice system [idle iowait] irq softirq steal


def _own_ticks(root: int) -> int:
    """utime + stime + cutime + cstime of `root` and every process below it (children that ended
    and were reaped are in their parent's cutime/cstime, so an engine restart loses nothing)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        f = stat_fields(entry.name)
        if f is None:
            continue
        pid = int(entry.name)
        parent[pid] = int(f[1])  # fields from "state": state ppid ... utime(11) stime cutime cstime(14)
        ticks[pid] = sum(int(x) for x in f[11:15])
    total = 0
    for pid, t in ticks.items():
        p, seen = pid, 0
        while p not in (root, 0, 1) and seen < 64:
            p, seen = parent.get(p, 0), seen + 1
        if p == root:
            total += t
    return total


def read_ticks(root: int | None = None) -> CpuTicks | None:
    """The machine's and `root`'s process tree's busy ticks now (root: this process); None where
    /proc is not Linux's."""
    t = time.monotonic()
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    machine = sum(int(first[1 + i]) for i in _BUSY if 1 + i < len(first))
    own = _own_ticks(os.getpid() if root is None else root)
    return CpuTicks(t, machine, own, os.cpu_count() or 1, os.sysconf("SC_CLK_TCK"))
