"""CPU time read from /proc (harness/bench/cpu_ticks.py): the run's own processes apart from everything
else on the machine. The rest of the busy-machine story: tests/analysis/test_machine.py."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("ours", [True, False])
def test_read_ticks_counts_a_spinning_child_as_own_and_an_orphan_as_foreign(ours):
    """A process spinning for a second: below this one it is the run's own CPU; reparented away
    (its shell exits at once), it is someone else's."""
    import subprocess
    import sys
    import time

    from harness.bench.cpu_ticks import read_ticks

    spin = f"{sys.executable} -c 'import time; e = time.monotonic() + 1.5\nwhile time.monotonic() < e: pass'"
    before = read_ticks()
    proc = subprocess.Popen(["sh", "-c", spin if ours else spin + " &"])
    time.sleep(1.2)
    after = read_ticks()
    proc.wait()
    if not ours:
        time.sleep(0.5)  # the orphan ends
    own, others = after.own - before.own, (after.machine - before.machine) - (after.own - before.own)
    spun = 0.3  # at least 0.3 s of CPU in the 1.2 s, however busy the machine
    if ours:
        assert own >= spun, (own, others)
    else:
        assert own < spun <= others, (own, others)
