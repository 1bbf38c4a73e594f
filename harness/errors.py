"""The one project exception type and the exit codes that are the CI contract.

Exit codes: 0 ok · 1 regression found by the gate (and nothing else) · 2 bad input or config ·
3 infrastructure failure (server did not start, timeout, disk full) · 4 internal error (a bug: the
traceback is in a log file) · 128 + signal when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
CI may retry 3 and must fail on 1.

A full disk is recognised however the writer says it (OSError ENOSPC/EDQUOT, torch.save's short-write
RuntimeError, safetensors' and pyarrow's own errors): `is_disk_full`, and `DiskFull` (exit 3) says
which folder filled, what is free there and what the write needs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import traceback
from collections.abc import Iterator
from pathlib import Path

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM and SIGHUP exit 128 + their number


class HarnessError(Exception):
    """An error the user can act on: one line saying what is wrong and how to fix it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadInput(HarnessError):
    """Malformed or missing input: a checkpoint, recipe, prompt file or run folder."""

    exit_code = EXIT_BAD_INPUT


class InfraError(HarnessError):
    """The machinery failed: a server did not start, a request timed out, a process died."""

    exit_code = EXIT_INFRA


class Regression(HarnessError):
    """The gate found a regression."""

    exit_code = EXIT_REGRESSION


# ----------------------------------------------------------------------------- a full disk

# A full file system (ENOSPC) or a used-up quota (EDQUOT): the same fix, so one error.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# How the writers that do not raise OSError say it: safetensors (Rust's io::Error, "... (os error
# 28)"), pyarrow ("[errno 28] ..."), and any message that carries the C library's wording.
_FULL_TEXT = re.compile(
    "|".join(
        [re.escape(os.strerror(n)) for n in sorted(_FULL_ERRNOS)]
        + [rf"\(os error {n}\)|\[errno {n}\]" for n in sorted(_FULL_ERRNOS)]
    ),
    re.IGNORECASE,
)
# torch.save's zip writer reports a short write without an errno: "[enforce fail at
# inline_container.cc:...] . unexpected pos 704 vs 598", "PytorchStreamWriter failed writing file
# ...: file write failed", or for a small file libstdc++'s "basic_ios::clear: iostream error".
_TORCH_SHORT_WRITE = re.compile(r"unexpected pos \d+ vs \d+|PytorchStreamWriter failed writing|basic_ios::clear")
_TORCH_SAVE_FILE = os.path.join("torch", "serialization.py")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and every cause and context behind it, each once."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def _raised_in_torch_save(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(_TORCH_SAVE_FILE):
            return True
        tb = tb.tb_next
    return False


def log_says_disk_full(text: str) -> bool:
    """Whether a child process's log (a traceback, not an exception object) ends in a full disk."""
    torch_write = _TORCH_SHORT_WRITE.search(text) is not None and _TORCH_SAVE_FILE in text
    return torch_write or _FULL_TEXT.search(text) is not None


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or anything in its chain) says a write found its file system full. A
    HarnessError has been classified by whoever raised it and is never re-read."""
    if isinstance(exc, HarnessError):
        return isinstance(exc, DiskFull)
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        if not isinstance(e, HarnessError) and _FULL_TEXT.search(str(e)):
            return True
        if isinstance(e, RuntimeError) and _TORCH_SHORT_WRITE.search(str(e)) and _raised_in_torch_save(e):
            return True
    return False


def _file_written(exc: BaseException) -> str | None:
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS and e.filename:
            return str(e.filename)
    return None


def free_bytes(folder: Path) -> int | None:
    """Free space on the file system that holds `folder` (or its nearest existing parent)."""
    for p in (folder, *folder.parents):
        if p.exists():
            try:
                return shutil.disk_usage(p).free
            except OSError:
                return None
    return None


def size_text(n: int) -> str:
    x, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if x < 1024:
            break
        x, unit = x / 1024, bigger
    return f"{n:,} B" if unit == "B" else f"{x:,.1f} {unit}"


class DiskFull(InfraError):
    """A write found its file system full (or the quota used up). Its one line names the folder,
    the space free there now, the space needed where the writer could say, and the fix."""

    def __init__(
        self,
        folder: Path | None,
        needed: int | None = None,
        what: str = "",
        writing: str | None = None,
        detail: str = "",
    ):
        self.folder, self.needed, self.what, self.writing, self.detail = folder, needed, what, writing, detail
        facts = []
        if folder is not None:
            free = free_bytes(folder)
            facts.append(f"{folder} has {size_text(free)} free" if free is not None else f"in {folder}")
        if needed:
            facts.append(f"needs {size_text(needed)}" + (f" for {what}" if what else ""))
        super().__init__(
            f"disk full{f' writing {writing}' if writing else ''}{f' ({detail})' if detail else ''}: "
            f"{'; '.join(facts) + '; ' if facts else ''}"
            "free space there and rerun the same command to resume (finished work is kept), "
            "or start over with the output on a larger disk (--run-dir, --out)"
        )

    @classmethod
    def from_exception(
        cls,
        exc: BaseException,
        folder: Path | None = None,
        needed: int | None = None,
        what: str = "",
        writing: Path | None = None,
    ) -> DiskFull:
        """The DiskFull for `exc` (is_disk_full(exc) holds) with what the caller knows of the write
        (the larger `needed`, its or the one `exc` carries, wins; the innermost folder and file win)."""
        for e in _chain(exc):  # a failed writer's locals hold its (deleted) file open: free it before measuring
            traceback.clear_frames(e.__traceback__)
        if isinstance(exc, DiskFull):
            if (exc.needed or 0) >= (needed or 0):
                needed, what = exc.needed, exc.what
            name = exc.writing or (str(writing) if writing else None)
            return cls(exc.folder or folder, needed, what, name, exc.detail)
        name = (str(writing) if writing else None) or _file_written(exc)
        if folder is None and name is not None:
            folder = Path(name).parent
        # nothing names the file: say which writer it was, in its own first line
        detail = "" if name else f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        return cls(folder, needed, what, name, detail)


@contextlib.contextmanager
def disk_full_as_infra(
    folder: Path, needed: int | None = None, what: str = "", writing: Path | None = None
) -> Iterator[None]:
    """Around a write into `folder` (of the file `writing`, when one): a full disk, however the
    writer says it, leaves as DiskFull (exit 3) naming `folder` and the space the write needs
    (`needed` bytes, for `what`)."""
    try:
        yield
    except Exception as e:
        if not is_disk_full(e):
            raise
        raise DiskFull.from_exception(e, folder, needed, what, writing) from e
