"""Where the repository's own files live (the leaf every layer may import)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = REPO_ROOT / "train" / "tiny-kimi.toml"
SUITES_DIR = REPO_ROOT / "bench" / "suites"
BUILTIN_TRAIN_PROMPTS = REPO_ROOT / "train" / "prompts" / "builtin.jsonl"
RUNS_DIR = REPO_ROOT / "results" / "runs"
BASELINES_DIR = REPO_ROOT / "results" / "baselines"


def cache_root() -> Path:
    """The harness's cache: stand-ins, pretrained verifiers, reference drafts, engine environments,
    crash logs ($HARNESS_CACHE, default ~/.cache/harness)."""
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "harness"))
