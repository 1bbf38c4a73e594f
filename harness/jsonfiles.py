"""JSON inputs read once, the same way everywhere: a broken file is bad input naming file:line
and what to do, never a traceback (config.json of a verifier or draft, harness.json, indexes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import BadInput


def read_json_file(path: Path, fix: str) -> object:
    """A JSON file, or BadInput naming file:line and `fix`."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start}); {fix}") from e
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: malformed JSON ({e.msg}); {fix}") from e
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror}); {fix}") from e


def read_checkpoint_config(folder: Path, not_a_folder: str, missing: str) -> dict[str, Any]:
    """A checkpoint folder's config.json as a dict; `not_a_folder` / `missing` say what the
    caller expected there (a verifier, a draft)."""
    cfg_path = folder / "config.json"
    if not folder.is_dir():
        raise BadInput(f"{folder}: not a folder; {not_a_folder}")
    if not cfg_path.is_file():
        raise BadInput(f"{cfg_path}: missing; {missing}")
    cfg = read_json_file(cfg_path, "fix or re-download config.json")
    if not isinstance(cfg, dict):
        raise BadInput(f"{cfg_path}: expected a JSON object; fix or re-download config.json")
    return cfg
