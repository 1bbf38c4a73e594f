"""Shared, expensive fixtures: built once per session, torn down always.

Stand-ins are built with the project's own builder into the harness cache
($HARNESS_CACHE, default ~/.cache/harness), so a second session reuses them; a fresh CI
machine builds them (a few minutes, once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.verifier.layout import resolve_layout
from tests.results_fixtures import runs  # noqa: F401 (the synthetic-runs fixture of the results tests)

# The test bed's recipe: the plain Kimi stand-in, no thinking format, the random reference draft
# (the embedded default, train/tiny-kimi.toml, extends it: thinking stand-in, ngram reference).
PLAIN_RECIPE = Path(__file__).resolve().parent.parent / "train" / "tiny-kimi-plain.toml"

# CI-sized training: small enough for a few minutes on 2 cores, large enough to show learning
# (the margins it must reach are in tests/e2e/test_train_e2e.py). States from vLLM's own extraction, as
# the production recipe takes them: its online twin (tests/torchrun_runs.py) then trains on the
# same states, streamed instead of stored, and the two drafts compare like for like.
CI_TRAIN = [
    "train.hidden_states_source='vllm'",
    "train.num_prompts=384",
    "train.max_new_tokens=96",
    "train.epochs=2",
    "train.total_seq_len=1024",
    "train.lr=3e-3",
    "train.validation_fraction=0.1",
]


CI_EPOCHS = int(next(s.split("=")[1] for s in CI_TRAIN if s.startswith("train.epochs=")))


def _standin(arch: str, **overrides) -> Path:
    from harness.verifier.standins.build import ensure_standin
    from harness.verifier.standins.specs import spec_for

    return ensure_standin(spec_for(arch, **overrides))


@pytest.fixture(scope="session")
def kimi_standin() -> Path:
    return _standin("kimi-k2.5")


@pytest.fixture(scope="session")
def llama_standin() -> Path:
    return _standin("llama")


@pytest.fixture(scope="session")
def deepseek_standin() -> Path:
    return _standin("deepseek-v3")


@pytest.fixture(scope="session")
def kimi_vocab_standin(kimi_standin) -> Path:
    """The plain Kimi stand-in with Kimi-K2.5's 163,840 token ids (train/tiny-kimi-vocab.toml):
    built from `kimi_standin` in seconds (harness/verifier/standins/padded.py)."""
    return _standin("kimi-k2.5", padded_vocab_size=163840)


@pytest.fixture(scope="session")
def kimi_layout(kimi_standin):
    return resolve_layout(kimi_standin)


@pytest.fixture(scope="session")
def kimi_tokenizer(kimi_standin):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(kimi_standin)


@pytest.fixture(scope="session")
def kimi_offline_engine(kimi_layout):
    """The Kimi stand-in in vLLM's offline engine (no speculation), shared by the session."""
    from harness.engine.offline import OfflineEngine
    from harness.engine.settings import engine_plan
    from harness.recipe import EngineSettings

    eng = OfflineEngine(engine_plan(EngineSettings(max_model_len=512), kimi_layout), probe=True)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture(scope="session")
def kimi_trained_run(tmp_path_factory, kimi_standin):
    """A draft trained at CI size for the Kimi stand-in (the default recipe), shared by the session.
    HARNESS_TEST_TRAIN_DIR names a folder to train into instead of a temporary one: a later
    session resumes it, i.e. reuses the finished run (for local iterations; CI trains afresh)."""
    import os

    from harness.recipe import load_recipe
    from harness.train.pipeline import run_train
    from harness.ui import Reporter

    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'", *CI_TRAIN])
    folder = os.environ.get("HARNESS_TEST_TRAIN_DIR")
    run_dir = Path(folder) if folder else tmp_path_factory.mktemp("kimi-ci") / "train"
    return run_train(recipe, run_dir, Reporter())


@pytest.fixture(scope="session")
def kimi_trained_draft(kimi_trained_run):
    """The same session training (a TrainResult), under the name the draft-format tests use."""
    return kimi_trained_run


@pytest.fixture(scope="session")
def torchrun_killed_and_resumed(tmp_path_factory, kimi_trained_run):
    """The session's training again as the production recipe trains: 2-process torchrun, online
    from a vLLM extraction server (tests/torchrun_runs.py KILLED_RUN), rank 1 killed after the first
    epoch and the run resumed to the end: the scale-out tests check the kill and the resume; the
    end-to-end bench (tests/e2e/test_train_e2e.py) serves its draft and checks its disk bound."""
    from tests.torchrun_runs import kill_rank_and_rerun

    return kill_rank_and_rerun(tmp_path_factory.mktemp("torchrun") / "train", kimi_trained_run)
