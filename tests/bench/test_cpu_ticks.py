"""CPU time read by psutil (harness/bench/cpu_ticks.py): the run's own processes apart from everything
else on the machine. The rest of the busy-machine story: tests/analysis/test_machine.py."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("ours", [True, False])
def test_read_ticks_counts_a_spinning_child_as_own_and_an_orphan_as_foreign(ours, tmp_path):
    """A process that spins for 0.6 s of CPU (not of wall time: a busy machine gives it less CPU
    per second): below this one it is the run's own CPU; reparented away (its shell exits at once),
    it is someone else's. Read after it ends, so the whole spin is counted however long it took."""
    import subprocess
    import sys
    import time

    from harness.bench.cpu_ticks import read_ticks

    done = tmp_path / "done"
    code = "import time, pathlib, sys\nwhile time.process_time() < 0.6: pass\npathlib.Path(sys.argv[1]).touch()"
    spin = f"{sys.executable} -c '{code}' {done}"
    before = read_ticks()
    proc = subprocess.Popen(["sh", "-c", spin if ours else spin + " &"])
    proc.wait()
    deadline = time.monotonic() + 60
    while not done.exists() and time.monotonic() < deadline:  # the orphan ends
        time.sleep(0.05)
    time.sleep(0.1)
    after = read_ticks()
    own, others = after.own - before.own, (after.machine - before.machine) - (after.own - before.own)
    spun = 0.5  # of its 0.6 s of CPU
    if ours:
        assert own >= spun, (own, others)
    else:
        assert own < spun <= others, (own, others)
