"""Process ownership (harness/engine/ownership.py): an engine's process group dies with the harness,
whatever kills it."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

import pytest

from harness.engine.ownership import process_alive
from harness.paths import REPO_ROOT
from tests.fault_helpers import PY, _descendants

_OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from harness.engine.ownership import child_preexec, start_watchdog

    # An "engine": a server process with grandchildren, in its own process group.
    p = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"], process_group=0, preexec_fn=child_preexec())
    start_watchdog(p.pid)
    print(p.pid, flush=True)
    time.sleep(300)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_engine_group_dies_with_its_owner_whatever_kills_it(sig):
    owner = subprocess.Popen([PY, "-c", _OWNER], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    owner.stdout.readline()
    time.sleep(0.5)
    procs = _descendants(owner.pid)
    assert len(procs) >= 4  # sh, two sleeps, the watchdog
    owner.send_signal(sig)
    owner.wait(10)
    time.sleep(5)
    assert [p for p, t in procs.items() if process_alive(p, t)] == []
