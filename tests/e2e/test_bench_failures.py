"""Bench under failure: a server that does not start, a request that times out, a killed run.
Real engines; failures injected at the edge."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.engine.ownership import process_alive
from harness.engine.server import ServerEngine
from harness.engine.settings import engine_plan
from harness.errors import InfraError
from harness.paths import REPO_ROOT
from harness.recipe import EngineSettings, load_recipe
from harness.results.manifest import (
    read_manifest,
)
from harness.results.table import tables_stale
from harness.ui import Reporter
from harness.verifier.layout import resolve_layout
from tests.conftest import PLAIN_RECIPE
from tests.engine_wrappers import WrappedEngine
from tests.fault_helpers import PY, _descendants
from tests.results_fixtures import run_frame

pytestmark = pytest.mark.slow

SMALL = [
    "bench.suites=['code','math']",
    "bench.num_prompts=2",
    "bench.max_tokens=16",
    "bench.k=[2]",
    "bench.concurrency=[1,2]",
    "bench.warmup_requests=0",
    "bench.reference_drafts=['ngram']",
    "bench.engine='offline'",
    "bench.machine_sentinel=false",  # failures only: no speed is asserted here
]


def test_server_that_fails_to_start_reports_its_log(tmp_path, kimi_standin):
    import dataclasses

    # The layout check would refuse this checkpoint before any server starts, so plan on the
    # good one and point the server at a copy broken afterwards (as a disk or a sync might).
    plan = engine_plan(EngineSettings(max_model_len=256), resolve_layout(kimi_standin))
    broken = tmp_path / "broken"
    shutil.copytree(kimi_standin, broken)
    cfg = json.loads((broken / "config.json").read_text())
    cfg["text_config"]["vocab_size"] = 4096  # the embedding weights no longer fit the config
    (broken / "config.json").write_text(json.dumps(cfg))
    plan = dataclasses.replace(plan, model=str(broken))
    with pytest.raises(InfraError) as e:
        ServerEngine(plan, tmp_path / "server.log", startup_timeout_s=300)
    assert e.value.exit_code == 3
    assert "exited with code" in e.value.message and "last lines of" in e.value.message
    assert len(e.value.message.splitlines()) > 3  # the server's own last log lines are included


class _TimeoutOnConcurrency(WrappedEngine):
    """A real engine whose batches at concurrency 2 get an impossible per-request timeout."""

    def generate(self, requests, sampling, concurrency, timeout_s=None):
        return self._e.generate(requests, sampling, concurrency, 0.001 if concurrency == 2 else timeout_s)


def test_timed_out_cell_is_marked_failed_and_the_others_continue(tmp_path, kimi_standin):
    from harness.bench.engines import default_engine_factory

    recipe = load_recipe(PLAIN_RECIPE, SMALL)
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, None)
    run_dir = tmp_path / "run"
    real = default_engine_factory(recipe, run_dir)
    run_bench(recipe, drafts, run_dir, Reporter(), engine_factory=lambda p, n: _TimeoutOnConcurrency(real(p, n)))
    manifest, df, missing = run_frame(run_dir)
    assert not missing and manifest.status == "complete"
    failed = df[df["concurrency"] == 2]
    ok = df[df["concurrency"] == 1]
    assert (failed["status"] == "failed").all() and failed["error"].str.contains("timed out").all()
    assert (ok["status"] == "ok").all() and (ok[ok["mode"] == "speculative"]["num_drafts"] > 0).all()


# Small cells: the test signals the run after a cell, with cells still to run.
_TINY_SERVER_BENCH = [
    "bench.engine='server'",
    "bench.suites=['code']",
    "bench.num_prompts=3",
    "bench.max_tokens=24",
    "bench.k=[3]",
    "bench.concurrency=[1,2,3,4]",
    "bench.warmup_requests=0",
    "bench.repeats=1",
    "bench.reference_drafts=[]",
    "bench.method='ngram'",
    "bench.machine_sentinel=false",  # processes and files only: no speed is asserted here
]


def _bench(run_id: str, *extra: str, sets: list[str] = _TINY_SERVER_BENCH) -> subprocess.Popen:
    args = [PY, "-m", "harness", "bench", str(PLAIN_RECIPE), "--run-id", run_id, *extra]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cells(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}


def _kill_after_next_cell(
    proc: subprocess.Popen, run_dir: Path, sig: signal.Signals, code: int, engine_marker: str = "api_server"
) -> dict[str, bytes]:
    """Wait for one more finished cell than the run had, send `sig`, and check that the harness
    exits with `code`, that none of its processes (vLLM servers or offline engine hosts, found by
    `engine_marker` in their command line) is alive 10 s later and that the manifest reads
    `interrupted`. Returns the cells finished before the signal."""
    had = len(_cells(run_dir)) if (run_dir / "cells").is_dir() else 0
    seen: dict[int, int] = {}  # every process of the run, gathered while it runs
    deadline = time.monotonic() + 900
    while not (run_dir / "cells").is_dir() or len(_cells(run_dir)) <= had:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        seen.update(_descendants(proc.pid))
        time.sleep(0.2)
    seen.update(_descendants(proc.pid))
    assert any(
        engine_marker in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
        for p in seen
        if process_alive(p, seen[p])
    )
    done = _cells(run_dir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-3000:]
    deadline = time.monotonic() + 10  # every process gone within 10 s of the harness's end
    while (alive := [p for p, t in seen.items() if process_alive(p, t)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert alive == []
    # SIGTERM writes "interrupted"; SIGKILL writes nothing, and the stale "running" reads so.
    assert read_manifest(run_dir).status == "interrupted"
    return done


@pytest.mark.slow
def test_killed_server_bench_leaves_no_process_and_resumes_byte_identical(kimi_standin):
    """One server-engine run, killed by SIGTERM after its first cell, then resumed to the end: the
    kill leaves no process behind and every cell finished before it is byte-identical at the end.
    The finished run (cells from two server pairs) also carries the server's per-step check
    (tests/step_sums.py). A SIGKILLed harness's engines: the offline test below and
    test_engine_group_dies_with_its_owner_whatever_kills_it (a server's process group)."""
    import shutil

    from tests.results_fixtures import run_frame
    from tests.step_sums import assert_steps_sum_to_counters

    run_id = f"faults-kill-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    try:
        first = _kill_after_next_cell(_bench(run_id), run_dir, signal.SIGTERM, 143)
        resumed = _bench(run_id, "--resume")
        _, err = resumed.communicate(timeout=900)
        assert resumed.returncode == 0, err[-3000:]
        final = _cells(run_dir)
        assert {n: b for n, b in final.items() if n in first} == first
        assert len(final) == 4 and len(first) < 4
        assert read_manifest(run_dir).status == "complete" and tables_stale(run_dir) is None
        _, df, _ = run_frame(run_dir)
        assert_steps_sum_to_counters(run_dir, df, requests_per_cell={"code": 3}, repeats=1)
        spec = df[df["mode"] == "speculative"]
        assert ((spec["speedup_ci_low"] <= spec["speedup"]) & (spec["speedup"] <= spec["speedup_ci_high"])).all()
        assert spec["repetition_share"].between(0.0, 1.0).all()
        # The server streams a verify step's tokens in one chunk: ITL per token <= per chunk, both
        # filled. Not equal for the baseline either: vLLM's output collector merges the steps a slow
        # client has not read yet into one chunk, which a loaded CI machine does (5.95 vs 6.17 ms).
        assert (df["itl_per_token_ms_median"] > 0).all() and (df["itl_ms_median"] > 0).all()
        assert (df["itl_per_token_ms_median"] <= df["itl_ms_median"] + 1e-9).all()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
def test_sigkilled_offline_bench_leaves_no_engine_host_behind(kimi_standin):
    """The offline engine's hosts (spawned children that import vLLM, and vLLM's own engine-core
    processes below them) die with a harness killed by SIGKILL, which runs no cleanup of its own
    (harness/engine/ownership.py)."""
    import shutil

    run_id = f"faults-kill-offline-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    sets = [*_TINY_SERVER_BENCH, "bench.engine='offline'", "bench.concurrency=[1,2]"]  # later --set wins
    try:
        proc = _bench(run_id, sets=sets)
        _kill_after_next_cell(proc, run_dir, signal.SIGKILL, -signal.SIGKILL, engine_marker="multiprocessing")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["offline", "server"])
def test_an_engine_that_does_not_start_in_time_is_exit_3_in_one_line(engine, kimi_standin):
    """engine.startup_timeout_s passed: infrastructure (exit 3, CI may retry), one line naming the
    timeout, the run folder says failed, and no engine process is left behind."""
    import shutil

    run_id = f"faults-timeout-{engine}-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    sets = [*_TINY_SERVER_BENCH, f"bench.engine='{engine}'", "engine.startup_timeout_s=0.5"]
    try:
        proc = _bench(run_id, sets=sets)
        seen: dict[int, int] = {}
        while proc.poll() is None:
            seen.update(_descendants(proc.pid))
            time.sleep(0.2)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("error:")]  # after the progress line
        assert len(errors) == 1, err[-3000:]
        first = errors[0]
        assert "within 0s" in first or "after 0s" in first, err[-3000:]
        deadline = time.monotonic() + 10
        while (alive := [p for p, t in seen.items() if process_alive(p, t)]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert alive == []
        assert read_manifest(run_dir).status == "failed"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


class _DiesOnSecondCell(WrappedEngine):
    """A real server engine whose vLLM server is killed (its whole process group, SIGKILL) just
    before its second measured batch: a server that dies mid-run, after one finished cell."""

    calls = 0

    def generate(self, requests, sampling, concurrency, timeout_s=None):
        self.calls += 1
        if self.calls == 2:
            os.killpg(self._e._proc.pid, signal.SIGKILL)
            self._e._proc.wait(30)
        return self._e.generate(requests, sampling, concurrency, timeout_s)


@pytest.mark.slow
def test_server_dying_mid_run_is_infrastructure_naming_its_log_and_keeps_finished_cells(tmp_path, kimi_standin):
    from harness.bench.engines import default_engine_factory
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.errors import InfraError
    from harness.recipe import load_recipe
    from harness.results.table import finished_cells
    from harness.ui import Reporter

    # warm-up off and one repeat: the speculative engine's 1st batch is cell 1's arm, its 2nd cell 2's
    recipe = load_recipe(
        None, [*_TINY_SERVER_BENCH, "bench.num_prompts=2", "bench.max_tokens=8", "bench.concurrency=[1,2]"]
    )
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, None)
    run_dir = tmp_path / "run"
    real = default_engine_factory(recipe, run_dir)

    def factory(plan, name):
        eng = real(plan, name)
        return _DiesOnSecondCell(eng) if plan.speculative else eng

    with pytest.raises(InfraError) as e:
        run_bench(recipe, drafts, run_dir, Reporter(), engine_factory=factory)
    assert e.value.exit_code == 3
    first = e.value.message.splitlines()[0]
    assert "vLLM server" in first and "exited with code" in first and "--resume" in first, first
    assert "last lines of" in first and "logs" in first
    assert len(finished_cells(run_dir)) == 1  # the finished cell is kept
    assert read_manifest(run_dir).status == "failed"  # resuming such a run: the kill tests above
