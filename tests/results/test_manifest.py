"""The manifest's truth (harness/results/manifest.py): a run's effective status, which run folders
may be reused or resumed."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from harness.engine.ownership import start_ticks
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.results.manifest import (
    effective_status,
    free_unstarted_run,
    read_manifest,
    require_resumable,
)
from harness.schema_manifest import Manifest
from tests.fault_helpers import one_line, run_cli


def test_resume_of_an_unknown_run_id_is_bad_input(capsys, monkeypatch):
    rid = f"faults-{uuid.uuid4().hex}"
    code, err = run_cli(capsys, monkeypatch, "bench", "--resume", "--run-id", rid)
    assert code == 2 and rid in one_line(err)
    assert not (REPO_ROOT / "results" / "runs" / rid).exists()


def test_stale_running_reads_as_interrupted():
    m = {"status": "running", "owner": {"pid": 123, "pid_start_ticks": 9, "hostname": "h"}}

    def status(data: dict, alive: bool, host: str) -> str:
        return effective_status(Manifest.from_dict(data), lambda pid, t: alive, host)

    assert status(m, False, "h") == "interrupted"
    assert status(m, True, "h") == "running"
    assert status(m, False, "other-host") == "running"  # cannot look: as recorded
    assert status({**m, "status": "complete"}, False, "h") == "complete"
    assert status({"status": "running"}, False, "h") == "running"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_unstarted_run_folder_can_be_reused_and_a_live_one_cannot(tmp_path):
    import socket

    run = tmp_path / "run"
    run.mkdir()
    dead = {"status": "running", "owner": {"pid": _dead_pid(), "pid_start_ticks": 1, "hostname": socket.gethostname()}}
    (run / "manifest.json").write_text(json.dumps(dead))
    assert read_manifest(run).status == "interrupted"
    assert free_unstarted_run(run, set()) and not (run / "manifest.json").exists()
    me = os.getpid()
    live = {
        "status": "running",
        "owner": {"pid": me, "pid_start_ticks": start_ticks(me), "hostname": socket.gethostname()},
    }
    (run / "manifest.json").write_text(json.dumps(live))
    with pytest.raises(BadInput, match="being run right now"):
        free_unstarted_run(run, set())
    with pytest.raises(BadInput, match="being run right now"):
        require_resumable(run)
    with pytest.raises(BadInput, match="finished cell"):
        free_unstarted_run(run, {"a-cell"})
