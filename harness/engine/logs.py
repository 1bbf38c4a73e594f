"""Engine logs: vLLM's own output goes to a file per engine; errors quote its last lines."""

from __future__ import annotations

from collections import deque
from pathlib import Path


def tail(path: Path, n: int = 15) -> str:
    try:
        with Path(path).open(errors="replace") as f:
            return "".join(deque(f, maxlen=n)).rstrip()
    except OSError:
        return "(no log)"
