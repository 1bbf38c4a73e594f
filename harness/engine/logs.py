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


def failing_checkpoint(path: Path, model: str, draft: str | None, extra: str = "") -> str:
    """Which checkpoint an engine's start failure is about, as its log tells: the last of its
    lines that names the draft's or the verifier's folder decides (a truncated draft shard must
    not read as the verifier's fault). `extra` (e.g. a traceback) counts as the log's last lines.
    Without such a line: both, so neither is hidden."""
    try:
        with Path(path).open(errors="replace") as f:
            lines = list(deque(f, maxlen=400))
    except OSError:
        lines = []
    lines += extra.splitlines()
    named = [("draft", draft.rstrip("/"))] if draft else []
    named.append(("verifier", model.rstrip("/")))
    for line in reversed(lines):
        if line.startswith("$ "):  # the command line names every folder
            continue
        for what, folder in named:
            if folder in line:
                return f"the {what} {folder}"
    return f"verifier {model}" + (f" with draft {draft}" if draft else "")
