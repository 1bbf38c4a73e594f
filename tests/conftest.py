"""Shared, expensive fixtures: built once per session, torn down always.

Stand-ins are built with the project's own builder into the harness cache
($HARNESS_CACHE, default ~/.cache/harness), so a second session reuses them; a fresh CI
machine builds them (a few minutes, once).
"""

from __future__ import annotations

import os
import sys
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


# `make test` runs the suite on two xdist workers (`-n 2`). Each worker is a machine of its own:
# pinned to its share of the cores, with that many OpenMP threads, so two torch or vLLM processes
# never time-slice one core's thread barriers (a 2-thread job beside another 2-thread job on 2 cores
# spins in its barriers), and the bench's foreign-CPU check (harness/bench/cpu_ticks.py reads only
# the cores the run may use) does not count the other worker as noise.
# Stand-in builds keep their own 2 threads (BUILD_THREADS in harness/verifier/standins/build.py:
# the weights depend on the thread count, and the suite's margins on the weights).
# A file is a unit of work (its module fixtures are built once), and the files that share the CI
# training's torchrun rerun are one unit (SHARED_TRAINING_FILES: that chain is built once). The CI
# training itself is built once for both workers (kimi_trained_run: a shared folder under a file lock;
# the other worker waits for it, then reads the finished run), so the files that only read it
# (TRAINING_READERS) are units of their own, queued after the slow files: by then it is built, and
# either worker takes them. Units go out in this order (`_order`), so that neither worker waits long
# for a stand-in or the training the other is building:
#   the shared training chain (the suite's longest; it builds the plain Kimi stand-in first),
#   fast files that need no stand-in,
#   files that build a stand-in of their own and need no Kimi one (BUILD_THEIR_OWN),
#   the slow files longest first (SLOW_FILES_LONGEST_FIRST: a fresh CI machine's durations), the
#   files that read the training, the other slow files, and last the fast files that need a
#   stand-in (short: they fill the end).
SHARED_TRAINING = "kimi_trained_run"
SHARED_TRAINING_FILES = (
    "tests/draft/test_warm_start.py",
    "tests/e2e/test_scaleout.py",
    "tests/e2e/test_train_e2e.py",
)
TRAINING_READERS = (  # longest first (this VM's durations, 2026-12-07)
    "tests/e2e/test_open_loop_engine.py",
    "tests/e2e/test_one_at_a_time_engine.py",
    "tests/e2e/test_shards_engine.py",
    "tests/test_headroom.py",
    "tests/e2e/test_dynamic_engine.py",
    "tests/train/test_health.py",
)
BUILD_THEIR_OWN = (
    "tests/e2e/test_thinking_engine.py",  # the thinking stand-in
    "tests/engine/test_method_limits.py",  # the Llama stand-in
    "tests/e2e/test_smollm2_e2e.py",  # SmolLM2 from its wheel
)
SLOW_FILES_LONGEST_FIRST = (
    "tests/e2e/test_bench_failures.py",
    "tests/e2e/test_production_vocab.py",
    "tests/train/test_agree.py",  # builds the DeepSeek stand-in
    "tests/e2e/test_rehearsal_engine.py",
    "tests/e2e/test_lossless_wiring.py",
    "tests/e2e/test_bench_reference.py",
    "tests/e2e/test_canary_engine.py",
)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    path = _file(nodeid)
    return SHARED_TRAINING if path in SHARED_TRAINING_FILES else path


@pytest.hookimpl(optionalhook=True)  # an environment without pytest-xdist runs the suite in one process
def pytest_xdist_make_scheduler(config, log):
    """Units of work by `_unit`, in the workers' collection order (pytest_collection_modifyitems)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)


def pytest_configure(config):
    # A machine record (bench/speedup_reruns.py --record) widens every speedup CI and raises the
    # drift tolerance; the suite reads none, so its assertions hold the same on a developer's
    # machine that measured one and on a fresh CI machine (tests/bench/test_machine_record.py
    # points it at its own file).
    os.environ["HARNESS_MACHINE_RECORD"] = os.devnull
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        _pin(int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))


def _pin(index: int, workers: int) -> None:
    from harness.engine.settings import allowed_cpus, core_share

    cores = allowed_cpus()
    if len(cores) < workers:  # too few to split: the workers share them
        return
    mine = core_share(cores, index, workers)
    os.sched_setaffinity(0, mine)
    os.environ["OMP_NUM_THREADS"] = str(len(mine))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(len(mine))


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    sharing = {_file(it.nodeid) for it in items if SHARED_TRAINING in it.fixturenames}
    if stray := sharing - set(SHARED_TRAINING_FILES) - set(TRAINING_READERS):
        raise pytest.UsageError(
            f"{sorted(stray)} use {SHARED_TRAINING}: add them to TRAINING_READERS (or SHARED_TRAINING_FILES)"
        )
    order = _order(items)
    items.sort(key=lambda it: order[_unit(it.nodeid)])


def _order(items) -> dict[str, tuple[int, int]]:
    """Each unit's place in the queue (see above)."""
    units = dict.fromkeys(_unit(it.nodeid) for it in items)
    slow = {_unit(it.nodeid) for it in items if it.get_closest_marker("slow")}
    standin = {_unit(it.nodeid) for it in items if any(f.endswith("_standin") for f in it.fixturenames)}
    order = {}
    for unit in units:
        if unit == SHARED_TRAINING:
            order[unit] = (0, 0)
        elif unit not in slow:
            order[unit] = (5, 0) if unit in standin else (1, 0)
        elif unit in BUILD_THEIR_OWN:
            order[unit] = (2, BUILD_THEIR_OWN.index(unit))
        elif unit in SLOW_FILES_LONGEST_FIRST:
            order[unit] = (3, SLOW_FILES_LONGEST_FIRST.index(unit))
        elif unit in TRAINING_READERS:
            order[unit] = (4, TRAINING_READERS.index(unit))
        else:
            order[unit] = (4, len(TRAINING_READERS))
    return order


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

    from filelock import FileLock

    from harness.recipe import load_recipe
    from harness.train.pipeline import run_train
    from harness.ui import Reporter

    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'", *CI_TRAIN])
    folder = os.environ.get("HARNESS_TEST_TRAIN_DIR")
    # one folder for both xdist workers (their base temps share a parent): the first trains, the
    # other waits on the lock, then run_train resumes the finished run, i.e. reads it
    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    run_dir = Path(folder) if folder else shared / "kimi-ci" / "train"
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(run_dir.parent / "train.lock")):
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
