"""The built-in training prompts are reproducible from their generator (their provenance)."""

from __future__ import annotations

import hashlib
import importlib.util

from harness.paths import BUILTIN_TRAIN_PROMPTS, REPO_ROOT


def test_generator_rebuilds_builtin_jsonl_byte_for_byte():
    spec = importlib.util.spec_from_file_location(
        "make_builtin_prompts", REPO_ROOT / "scripts" / "make_builtin_prompts.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rebuilt = mod.render(mod.build_records()).encode()
    committed = BUILTIN_TRAIN_PROMPTS.read_bytes()
    assert hashlib.sha256(rebuilt).hexdigest() == hashlib.sha256(committed).hexdigest(), (
        "train/prompts/builtin.jsonl differs from what scripts/make_builtin_prompts.py generates; "
        "regenerate it (and retrain baselines) or revert the generator"
    )
