"""CPU time read by psutil (harness/bench/cpu_ticks.py): the run's own processes apart from everything
else on the machine. The rest of the busy-machine story: tests/analysis/test_machine.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.bench.cpu_ticks import read_ticks

SPIN_S = 0.6


def _spin(done, orphan: bool, preexec_fn=None) -> None:
    """A process that spins for SPIN_S of CPU (not of wall time: a busy machine gives it less CPU per
    second), below this one or reparented away (its shell exits at once); returns once it has ended."""
    code = f"import time, pathlib, sys\nwhile time.process_time() < {SPIN_S}: pass\npathlib.Path(sys.argv[1]).touch()"
    spin = f"{sys.executable} -c '{code}' {done}"
    subprocess.run(["sh", "-c", spin + " &" if orphan else spin], preexec_fn=preexec_fn, check=True)
    deadline = time.monotonic() + 60
    while not done.exists() and time.monotonic() < deadline:  # the orphan ends
        time.sleep(0.05)
    assert done.exists()
    time.sleep(0.1)


@pytest.mark.parametrize("ours", [True, False])
def test_read_ticks_counts_a_spinning_child_as_own_and_an_orphan_as_foreign(ours, tmp_path):
    """Below this process the spin is the run's own CPU; reparented away, it is someone else's. Read
    after it ends, so the whole spin is counted however long it took."""
    before = read_ticks()
    _spin(tmp_path / "done", orphan=not ours)
    after = read_ticks()
    own, others = after.own - before.own, (after.machine - before.machine) - (after.own - before.own)
    spun = 0.5  # of its 0.6 s of CPU
    if ours:
        assert own >= spun, (own, others)
    else:
        assert own < spun <= others, (own, others)


def test_read_ticks_leaves_out_a_neighbour_on_cores_the_run_may_not_use(tmp_path):
    """Someone else's process pinned to another core (taskset, another container's cpuset, the other
    test worker) takes none of the run's CPU time: it is not foreign CPU on the run's cores."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores: one for the run, one for the neighbour")
    saved = os.sched_getaffinity(0)
    mine = min(saved)
    other = next(c for c in range(os.cpu_count() or 2) if c != mine)
    try:
        os.sched_setaffinity(0, {mine})
        before = read_ticks()
        _spin(tmp_path / "done", orphan=True, preexec_fn=lambda: os.sched_setaffinity(0, {other}))
        after = read_ticks()
    finally:
        os.sched_setaffinity(0, saved)
    others = (after.machine - before.machine) - (after.own - before.own)
    assert after.ncpu == 1
    assert others < 0.3, others  # of the neighbour's 0.6 s
