"""Terminating signals honoured at the next safe point (harness/interrupts.py)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

from harness.paths import REPO_ROOT
from tests.fault_helpers import PY, one_line

_SWALLOWER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness import interrupts
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("nap")
    def nap(marker: str):
        Path(marker).write_text("started")
        try:
            time.sleep(120)
        except KeyboardInterrupt:
            pass  # lost on the way, as in a __del__ or a library's broad except
        for _ in range(100):  # the next units of work, each starting at a safe point
            interrupts.check()
            time.sleep(0.1)
        Path(marker).write_text("ran to the end")

    sys.argv = ["harness", "nap", sys.argv[1]]
    main()
""")


def test_a_sigterm_whose_exception_was_lost_stops_the_run_at_the_next_safe_point(tmp_path):
    """The bench checks for a received SIGTERM before every arm (harness/interrupts.py): a run
    whose KeyboardInterrupt was swallowed still ends as interrupted (143) instead of finishing."""
    marker = tmp_path / "marker"
    proc = subprocess.Popen([PY, "-c", _SWALLOWER, str(marker)], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert marker.read_text() == "started"
    assert "interrupted (SIGTERM)" in one_line(err)
