"""Helpers the fault-injection tests share (split out of the old grab-bag fault file): the CLI run in
this process through the real entry point, the one-line error check, hand-written safetensors files
and a process tree."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from harness.cli.entry import main
from harness.engine.ownership import start_ticks

PY = sys.executable


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    """`harness ARGS` in this process, through the real entry point: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    return code, capsys.readouterr().err.strip()


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A safetensors file by hand: name -> (dtype, shape, bytes per element), zero data."""
    header, offset = {}, 0
    for name, (dtype, shape, width) in tensors.items():
        n = width
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + bytes(offset))


def _draft(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"speculators_model_type": "eagle3"}))
    _write_safetensors(folder / "model.safetensors", {"fc.weight": ("F32", [4, 8], 4), "norm.weight": ("BF16", [4], 2)})
    return folder


def _descendants(root: int) -> dict[int, int]:
    """pid -> start ticks of every live process below `root` (from /proc)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(name))
    out, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            ticks = start_ticks(c)
            if ticks is not None:
                out[c] = ticks
                todo.append(c)
    return out
