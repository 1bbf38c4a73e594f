"""Where the repository's own files live (the leaf every layer may import)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = REPO_ROOT / "train" / "tiny-kimi.toml"
SUITES_DIR = REPO_ROOT / "bench" / "suites"
BUILTIN_TRAIN_PROMPTS = REPO_ROOT / "train" / "prompts" / "builtin.jsonl"
RUNS_DIR = REPO_ROOT / "results" / "runs"
BASELINES_DIR = REPO_ROOT / "results" / "baselines"
