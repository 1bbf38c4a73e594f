"""Bench under failure: a server that does not start, a request that times out, a killed run.
Real engines; failures injected at the edge."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.engine.server import ServerEngine
from harness.engine.settings import engine_plan
from harness.errors import InfraError
from harness.recipe import EngineSettings, load_recipe
from harness.ui import Reporter
from harness.verifier.layout import resolve_layout
from tests.conftest import PLAIN_RECIPE
from tests.engine_wrappers import WrappedEngine
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
