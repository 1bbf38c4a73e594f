"""The exit-code contract on the real entry point (`python -m harness`): a usage error is bad
input (exit 2, with the usage or a pointer to --help), never an internal error (exit 4, which
writes a crash log and asks for a bug report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT

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
