"""A full disk, in any writer, is exit 3 in one line naming the folder (harness/errors.py:
DiskFull), and leaves no half-written file that looks whole: checked on real full disks, never
mocks. A full character device (/dev/full: every write fails with ENOSPC) needs nothing; a 1 MiB
tmpfs mounted for the test (root, as CI runs) gives real folders to fill, free and resume in.
"""

from __future__ import annotations

import errno
import gc
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from harness.errors import EXIT_INFRA, BadInput, DiskFull, is_disk_full, log_says_disk_full, size_text
from harness.paths import REPO_ROOT
from harness.provenance import atomic_dir, atomic_path, atomic_write_json
from harness.train.hidden_states import Sample, extract_to_shards, pending_tokens, shard_path
from tests.results_fixtures import MATRIX, make_run

IS_ROOT = os.geteuid() == 0


def _caught(write: Callable[[], object]) -> BaseException:
    try:
        write()
    except Exception as e:
        return e
    raise AssertionError("the write did not fail on a full disk")


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


# ----------------------------------------------------------------------------- a full device


@pytest.fixture
def full_device(tmp_path) -> Iterator[Path]:
    """A character device every write to fails with ENOSPC. As root a private node like /dev/full
    (1, 7): a writer that replaces its target (safetensors writes a temp file and renames it)
    must never replace the system's /dev/full."""
    dev = Path("/dev/full")
    if IS_ROOT:
        dev = tmp_path / "full"
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert stat.S_ISCHR(dev.stat().st_mode), f"{dev} is not a character device"
    yield dev
    assert stat.S_ISCHR(dev.stat().st_mode), f"a writer replaced {dev} with a file"


@pytest.mark.parametrize("numel", [10, 10**6], ids=["small", "large"])
def test_torch_save_says_a_full_disk_without_errno_and_is_recognised(full_device, numel):
    """The reported bug: torch.save raises RuntimeError ("unexpected pos 704 vs 598"; a small file
    "basic_ios::clear: iostream error"), not OSError."""
    e = _caught(lambda: torch.save({"a": torch.zeros(numel)}, full_device))
    assert type(e) is RuntimeError and not isinstance(e, OSError)
    assert is_disk_full(e)


def test_open_write_and_parquet_on_a_full_device_are_recognised(full_device):
    def write():
        with open(full_device, "wb") as f:
            f.write(b"x" * 100)

    e = _caught(write)
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC and is_disk_full(e)
    e = _caught(lambda: pd.DataFrame({"a": np.arange(1000.0)}).to_parquet(full_device))
    assert is_disk_full(e)


def test_what_is_not_a_full_disk_stays_what_it_is():
    assert not is_disk_full(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"))
    assert not is_disk_full(OSError(errno.ENOENT, "No such file or directory", "x"))
    assert not is_disk_full(KeyError("surprise"))
    assert not is_disk_full(BadInput("prompts.jsonl: No space left on device"))  # classified by its raiser


def test_a_full_disk_anywhere_in_the_chain_counts():
    try:
        try:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        except OSError as inner:
            raise ValueError("could not save") from inner
    except ValueError as e:
        assert is_disk_full(e)
    assert log_says_disk_full("Traceback ...\nOSError: [Errno 28] No space left on device\n")
    assert log_says_disk_full(
        'File ".../torch/serialization.py", line 967, in save\n'
        "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"
    )
    assert not log_says_disk_full("RuntimeError: unexpected pos 1 vs 2")


_TORCH_SAVE_CMD = textwrap.dedent("""
    import sys
    import torch
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("save")
    def save():
        torch.save({{"a": torch.zeros(10**6)}}, {dev!r})

    sys.argv = ["harness", "save"]
    main()
""")


def test_torch_save_on_a_full_disk_exits_3_in_one_line_not_4(tmp_path, full_device):
    """The reported exit 4 ("internal error ... please report it"), on the real entry point."""
    p = subprocess.run(
        [sys.executable, "-c", _TORCH_SAVE_CMD.format(dev=str(full_device))],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")},
        timeout=120,
    )
    line = _one_line(p.stderr)
    assert p.returncode == EXIT_INFRA, p.stderr
    assert line.startswith("error: disk full (RuntimeError: [enforce fail") and "please report" not in line
    assert "rerun the same command to resume" in line
    assert not (tmp_path / "cache" / "crash").exists()


# ----------------------------------------------------------------------------- a full tmpfs


class Disk:
    """A 1 MiB tmpfs at `root`, filled by `filler` to leave `free()` bytes."""

    def __init__(self, root: Path):
        self.root, self.filler = root, root / "filler"

    def free(self) -> int:
        return shutil.disk_usage(self.root).free

    def fill(self, leave: int = 0) -> None:
        """Take all space but `leave` bytes (0: writes until ENOSPC)."""
        with open(self.filler, "ab") as f:
            while self.free() > leave:
                try:
                    f.write(b"\0" * min(4096, self.free() - leave))
                    f.flush()
                except OSError as e:
                    assert e.errno == errno.ENOSPC
                    break
        assert self.free() <= max(leave, 0) + 4096

    def make_room(self) -> None:
        self.filler.unlink()

    def files(self, folder: Path | None = None) -> list[str]:
        """Every file left under `folder` (default the disk) but the filler."""
        base = folder or self.root
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file() and p != self.filler)


@pytest.fixture
def disk(tmp_path) -> Iterator[Disk]:
    root = tmp_path / "disk"
    root.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)], capture_output=True, text=True)
    if r.returncode != 0:
        why = f"`mount -t tmpfs` failed: {r.stderr.strip() or r.returncode}"
        if IS_ROOT:  # CI runs as root: a full-disk suite that cannot mount must not pass quietly
            pytest.fail(f"{why} (as root); these tests need a real tmpfs")
        pytest.skip(f"{why}; mounting needs root (the /dev/full tests above still run)")
    try:
        yield Disk(root)
    finally:
        # a failed torch.save keeps its (deleted) file open until its traceback is collected
        gc.collect()
        if subprocess.run(["umount", str(root)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(root)], check=True)


def test_every_writer_on_a_full_tmpfs_is_recognised(disk):
    disk.fill()
    big = torch.zeros(10**5)
    writes: dict[str, Callable[[], object]] = {
        "torch.save": lambda: torch.save({"a": big}, disk.root / "t.pt"),
        "safetensors": lambda: save_file({"a": big}, str(disk.root / "s.safetensors")),
        "open().write": lambda: (disk.root / "w.txt").write_bytes(b"x" * 10**5),
        "to_parquet": lambda: pd.DataFrame({"a": np.arange(10**5.0)}).to_parquet(disk.root / "p.parquet"),
        "np.save": lambda: np.save(disk.root / "n.npy", np.zeros(10**5)),
    }
    for name, write in writes.items():
        e = _caught(write)
        assert is_disk_full(e), (name, repr(e))


def _torch_into(p: Path) -> None:
    torch.save({"a": torch.zeros(10**5)}, p)


def _safetensors_into(folder: Path) -> None:
    save_file({"a": torch.zeros(10**5)}, str(folder / "model.safetensors"))


def test_the_atomic_writers_raise_disk_full_naming_the_folder_and_leave_nothing(disk):
    out = disk.root / "run" / "cells"
    out.mkdir(parents=True)
    disk.fill()
    writes: dict[str, Callable[[], object]] = {
        "atomic_write_json": lambda: atomic_write_json(out / "x.json", {"rows": list(range(50_000))}),
        "atomic_path + torch.save": lambda: _with_atomic_path(out / "x.pt", _torch_into),
        "atomic_path + to_parquet": lambda: _with_atomic_path(
            out / "x.parquet", lambda p: pd.DataFrame({"a": np.arange(10**5.0)}).to_parquet(p)
        ),
        "atomic_dir + safetensors": lambda: _with_atomic_dir(out / "draft", _safetensors_into),
    }
    for name, write in writes.items():
        e = _caught(write)
        assert isinstance(e, DiskFull) and e.exit_code == EXIT_INFRA, (name, repr(e))
        assert "\n" not in e.message and f"{out} has " in e.message and "free" in e.message, e.message
        assert disk.files(out) == [] and not list(out.iterdir()), (name, list(out.iterdir()))
    json_write = _caught(writes["atomic_write_json"])
    assert isinstance(json_write, DiskFull) and json_write.needed and "needs" in json_write.message


def _with_atomic_path(path: Path, write: Callable[[Path], None]) -> None:
    with atomic_path(path) as tmp:
        write(tmp)


def _with_atomic_dir(path: Path, build: Callable[[Path], None]) -> None:
    with atomic_dir(path) as tmp:
        build(tmp)


# ----------------------------------------------------------------------------- hidden states


def _samples(n: int, tokens: int) -> list[Sample]:
    return [Sample(f"s{i}", tuple(range(tokens // 2)), tuple(range(tokens - tokens // 2))) for i in range(n)]


def _states(aux: int, hidden: int):
    def states(batch):
        return [
            {"aux": torch.ones(len(s.input_ids), aux, hidden), "last": torch.ones(len(s.input_ids), hidden)}
            for s in batch
        ]

    return states


def test_hidden_states_on_a_full_disk_keep_finished_shards_and_resume(disk):
    """Three shards of 4 samples x 32 tokens (~66 KiB each) with room for one: the first is kept
    whole, the second is not left half-written, the stage names what the two left need, and after
    freeing space a rerun writes only the missing shards."""
    folder, samples, shard = disk.root / "run" / "hidden", _samples(12, 32), 4
    folder.mkdir(parents=True)
    disk.fill(leave=100 * 1024)
    run = lambda: extract_to_shards(_states(3, 64), samples, folder, shard_size=shard, max_batch_tokens=None)  # noqa: E731
    e = _caught(run)
    assert isinstance(e, DiskFull) and str(shard_path(folder, 1)) in e.message
    # the free space as it is: torch's writer no longer holds the deleted temp file open
    assert disk.free() > 0 and f"{folder} has {size_text(disk.free())} free" in e.message, e.message
    assert disk.files(folder) == ["shard-00000.pt"]
    assert len(torch.load(shard_path(folder, 0))) == shard
    assert pending_tokens(samples, folder, shard) == 8 * 32

    from harness.train.states import _hidden_states_need

    recipe = SimpleNamespace(train=SimpleNamespace(hidden_states_shard_size=shard, hidden_states_dtype="bfloat16"))
    need, what = _hidden_states_need(recipe, SimpleNamespace(hidden_size=64), folder, samples, [0, 1, 2])  # type: ignore[arg-type]
    stage = DiskFull.from_exception(e, folder, need, what)
    assert need == 8 * 32 * (4 * 64 * 2 + 9) > (e.needed or 0)
    assert "needs 130.2 KiB for the shards still to write: 256 tokens x ((aux 3 + 1) x hidden 64 x 2 B + 9 B" in (
        stage.message
    )

    first = shard_path(folder, 0).stat().st_mtime_ns
    disk.make_room()
    run()
    assert disk.files(folder) == ["shard-00000.pt", "shard-00001.pt", "shard-00002.pt"]
    assert shard_path(folder, 0).stat().st_mtime_ns == first
    assert [r["id"] for r in torch.load(shard_path(folder, 2))] == ["s8", "s9", "s10", "s11"]


# ----------------------------------------------------------------------------- a command


def _harness(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT
    )


def test_report_into_a_full_disk_exits_3_in_one_line_and_resumes_after_freeing_space(tmp_path, disk):
    run = make_run(tmp_path, "r", MATRIX)
    out = disk.root / "report"
    disk.fill()

    res = CliRunner().invoke(_app(), ["report", str(run), "--out", str(out)])
    assert isinstance(res.exception, DiskFull) and res.exception.exit_code == EXIT_INFRA, res.output

    p = _harness(["report", str(run), "--out", str(out)], tmp_path / "cache")
    line = _one_line(p.stderr)
    assert p.returncode == EXIT_INFRA, p.stderr
    assert line.startswith(f"error: disk full writing {out}/") and f"{out} has 0 B free; needs " in line, line
    assert "rerun the same command to resume" in line and "please report" not in line
    assert disk.files() == [], "a half-written report or plot was left behind"
    assert not (tmp_path / "cache" / "crash").exists()

    disk.make_room()
    p = _harness(["report", str(run), "--out", str(out)], tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    assert {"report.md", "report.html"} <= set(disk.files(out))
    assert (out / "report.html").read_text().rstrip().endswith("</html>")


def _app():
    from harness.cli.app import app

    return app


# ----------------------------------------------------------------------------- checkpoints


def test_a_checkpoint_that_does_not_fit_names_its_folder_and_the_last_ones_size(tmp_path, disk, monkeypatch):
    """speculators saves checkpoints itself (safetensors: its own SafetensorError): the fit stage
    names the checkpoints folder and what one more checkpoint takes (the last one's size)."""
    from harness.train import fit, training

    ckpt = disk.root / "checkpoints"
    (ckpt / "0").mkdir(parents=True)
    save_file({"w": torch.zeros(20_000)}, str(ckpt / "0" / "model.safetensors"))
    (ckpt / "0" / training.CHECKPOINT_DONE).write_text("{}")
    last = sum(f.stat().st_size for f in (ckpt / "0").iterdir())

    def save_next_epoch(plan, on_train, on_val):
        (ckpt / "1").mkdir(exist_ok=True)
        save_file({"w": torch.zeros(20_000)}, str(ckpt / "1" / "model.safetensors"))
        return {"epochs": 2}

    monkeypatch.setattr(fit, "run_fit", save_next_epoch)
    plan = SimpleNamespace(checkpoint_dir=str(ckpt), init_from=None, to_dict=dict)
    recipe = SimpleNamespace(
        train=SimpleNamespace(launcher="python", ttt_steps=3), draft=SimpleNamespace(method="eagle3")
    )
    disk.fill()
    e = _caught(lambda: training._run_fit(recipe, tmp_path, plan, _NoReport()))  # type: ignore[arg-type]
    assert isinstance(e, DiskFull) and e.needed == last, e
    assert e.message.startswith("disk full (SafetensorError: "), e.message
    assert f"{ckpt} has 0 B free; needs {last / 1024:.1f} KiB for another checkpoint as big as the last" in e.message
    assert not (ckpt / "1" / "model.safetensors").exists()

    disk.make_room()  # the rerun drops the unfinished epoch folder and saves it again
    result, _, _ = training._run_fit(recipe, tmp_path, plan, _NoReport())  # type: ignore[arg-type]
    assert result["epochs"] == 2 and (ckpt / "1" / "model.safetensors").is_file()


class _NoReport:
    def __getattr__(self, name):
        return lambda *a, **k: None
