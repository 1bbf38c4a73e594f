"""A run's manifest.json tells the truth about the run's state.

The bench writes `status` (running -> complete | interrupted | failed) as it goes, but a process
killed with SIGKILL (or a machine that lost power) writes nothing: its manifest says `running`
forever. So a run records who runs it (`owner`: pid, the pid's start time, hostname) and every
reader asks `effective_status`: a `running` run whose process is gone reads as `interrupted`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.schema import CSV_FILE, TABLE_FILE
from harness.schema import MANIFEST_FILE as MANIFEST
from harness.schema_manifest import INTERRUPTED, RUNNING, Manifest


def owner_fields() -> dict[str, Any]:
    """What identifies this harness process: recorded when a run starts running."""
    from harness.engine.ownership import start_ticks

    pid = os.getpid()
    return {"owner": {"pid": pid, "pid_start_ticks": start_ticks(pid), "hostname": socket.gethostname()}}


def effective_status(manifest: Manifest, pid_alive: Callable[[int, int | None], bool], hostname: str) -> str:
    """The recorded status, except that `running` becomes `interrupted` when the recorded owner
    process (on this host) no longer exists. A run of another host, or one that recorded no
    owner, keeps what it says: there is no way to look."""
    owner = manifest.owner
    if manifest.status != RUNNING or owner is None or not owner.pid or owner.hostname != hostname:
        return manifest.status
    return RUNNING if pid_alive(int(owner.pid), owner.pid_start_ticks) else INTERRUPTED


def read_manifest_data(folder: Path, missing_ok: bool = False) -> dict[str, Any]:
    """manifest.json as written (the one parser of the file; {} when it is absent and
    `missing_ok`). The bench updates it; readers want `read_manifest`'s effective status."""
    path = folder / MANIFEST
    if missing_ok and not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: unreadable ({e})") from e
    if not isinstance(manifest, dict):
        raise BadInput(f"{path}: unreadable (not a JSON object)")
    return manifest


def read_manifest(folder: Path) -> Manifest:
    """manifest.json with its effective status; `recorded_status` keeps what the file says
    when the two differ."""
    from harness.engine.ownership import process_alive

    manifest = Manifest.from_dict(read_manifest_data(folder))
    status = effective_status(manifest, process_alive, socket.gethostname())
    if status == manifest.status or manifest.owner is None:
        return manifest
    owner = manifest.owner
    return manifest.with_status(
        status,
        f"recorded as {manifest.status}, but its process (pid {owner.pid} on {owner.hostname}) is gone: it was killed",
    )


def _running_note(run_dir: Path, manifest: Manifest, what: str) -> str:
    owner = manifest.owner
    pid, host = (owner.pid, owner.hostname) if owner else ("?", "?")
    return f"{run_dir} is being run right now (pid {pid} on {host}); {what}"


def free_unstarted_run(run_dir: Path, finished: set[str]) -> bool:
    """Let a new run take the id of one that never finished a cell (it failed validation, or was
    stopped while its engines started): its manifest and derived tables are removed, its logs
    kept. False (nothing touched) when the folder holds no run; BadInput when it holds finished
    cells or a run still running."""
    path = run_dir / MANIFEST
    if not path.is_file():
        return False
    if finished:
        raise BadInput(
            f"{run_dir} already holds a run with {len(finished)} finished cell(s); pass --resume "
            "to complete it, or choose another run id"
        )
    manifest = read_manifest(run_dir)
    if manifest.status == RUNNING:
        raise BadInput(_running_note(run_dir, manifest, "wait for it or choose another run id"))
    for name in (MANIFEST, TABLE_FILE, CSV_FILE):
        (run_dir / name).unlink(missing_ok=True)
    return True


def require_resumable(run_dir: Path) -> None:
    """`--resume` of a run id that holds no run is a typo, not a request for a new run."""
    if not (run_dir / MANIFEST).is_file():
        raise BadInput(
            f"--resume: no run {run_dir.name!r} under {run_dir.parent}; check --run-id "
            "(or drop --resume to start a new run)"
        )
    manifest = read_manifest(run_dir)
    if manifest.status == RUNNING and manifest.owner is not None:
        raise BadInput(_running_note(run_dir, manifest, "wait for it to end before resuming"))
