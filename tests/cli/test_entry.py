"""The exit-code contract on the real entry point (`python -m harness`): a usage error is bad
input (exit 2, with the usage or a pointer to --help), never an internal error (exit 4, which
writes a crash log and asks for a bug report)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT
from harness.paths import REPO_ROOT
from tests.fault_helpers import PY, one_line

USAGE_ERRORS = {
    "unknown option": ["bench", "--bogus"],
    "unknown command": ["nosuchcmd"],
    "unknown subcommand": ["verifier", "nosuchcmd"],
    "missing argument": ["compare"],
    "option missing its value": ["compare", "RUN", "RUN", "--markdown"],
    "bad option value": ["verifier", "agree", "x", "--threshold", "high"],
}


def _harness(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("kind", list(USAGE_ERRORS))
def test_usage_errors_exit_2_with_usage_and_no_crash_log(kind, tmp_path):
    res = _harness(USAGE_ERRORS[kind], tmp_path)
    assert res.returncode == EXIT_BAD_INPUT, (kind, res.returncode, res.stderr)
    err = res.stderr
    assert "Error:" in err and ("Usage:" in err or "--help" in err), err
    assert "internal error" not in err and "Traceback" not in err, err
    assert not (tmp_path / "crash").exists()


def test_help_exits_0(tmp_path):
    res = _harness(["bench", "--help"], tmp_path)
    assert res.returncode == 0 and "Usage:" in res.stdout


def test_a_bug_still_exits_4_with_a_crash_log(tmp_path, monkeypatch):
    """The other side of the contract: an unexpected exception is exit 4 with its traceback logged."""
    from harness.cli.entry import main

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["harness", "recipe", "show"])

    def boom(*a, **k):
        raise RuntimeError("planted bug")

    monkeypatch.setattr("harness.recipe.load_recipe", boom)
    with pytest.raises(SystemExit) as ex:
        main()
    assert ex.value.code == 4
    logs = list((tmp_path / "crash").glob("*.log"))
    assert len(logs) == 1 and "planted bug" in logs[0].read_text()


_RAISING = textwrap.dedent("""
    import errno, sys
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("boom")
    def boom():
        raise {exc}

    sys.argv = ["harness", "boom"]
    main()
""")


def test_unexpected_error_exits_4_with_one_line_pointing_to_the_traceback(tmp_path):
    p = subprocess.run(
        [PY, "-c", _RAISING.format(exc="KeyError('surprise')")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path)},
        timeout=120,
    )
    assert p.returncode == 4, p.stderr
    line = one_line(p.stderr)
    logs = list((tmp_path / "crash").glob("*.log"))
    assert len(logs) == 1 and str(logs[0]) in line and "KeyError" in line
    assert "Traceback" in logs[0].read_text() and "surprise" in logs[0].read_text()


def test_disk_full_is_infrastructure(tmp_path):
    exc = "OSError(errno.ENOSPC, 'No space left on device', 'cells/x.json')"
    p = subprocess.run(
        [PY, "-c", _RAISING.format(exc=exc)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path)},
        timeout=120,
    )
    assert p.returncode == 3 and "disk full writing cells/x.json" in one_line(p.stderr)


_SLEEPER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("nap")
    def nap(marker: str):
        try:
            Path(marker).write_text("started")
            time.sleep(120)
        finally:
            Path(marker).write_text("cleaned up")  # what closes engines and writes the manifest

    sys.argv = ["harness", "nap", sys.argv[1]]
    main()
""")


def _default_signal_dispositions() -> None:
    """A terminal user's harness: a test suite started under nohup (SIGHUP ignored) or as a shell's
    background job (SIGINT ignored) would hand those ignores down, and the CLI keeps an ignore."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_terminating_signals_unwind_like_ctrl_c(tmp_path, sig, code):
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [PY, "-c", _SLEEPER, str(marker)],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signal_dispositions,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert marker.read_text() == "cleaned up"
    assert "interrupted" in one_line(err)
