"""A raced answer table on real vLLM-CPU engines (bench.race, harness/bench/race.py): every arm's engine
up at once, prompts drawn in rounds, an arm measured only until its rank is settled."""

from __future__ import annotations

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.recipe import load_recipe
from harness.results import answer
from harness.results.runs import read_run
from harness.results.table import load_cell_requests
from harness.ui import Reporter
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow


def test_an_arm_that_cannot_be_fastest_stops_being_measured(tmp_path, kimi_standin):
    """The untrained same-shaped draft (a reference, ~0.6x on the stand-in) against ngram and no
    speculation, 24 prompts in rounds of 8: the control leaves the race at the first look that sets it
    clear of every candidate, before the budget; every cell holds exactly the prompts drawn while it
    raced, its baseline arm the same requests, and the answer table says how the setting was raced."""
    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "bench.suites=['code']",  # one turn per prompt
            "bench.num_prompts=24",
            "bench.max_tokens=24",
            "bench.k=[2]",
            "bench.concurrency=[4]",
            "bench.warmup_requests=0",
            "bench.machine_sentinel=false",
            "bench.reference_drafts=['random', 'ngram']",
            "bench.race=true",
            "bench.race_round_prompts=8",
        ],
    )
    drafts = resolve_drafts(recipe, resolve_verifier(recipe), None)
    run_dir = tmp_path / "run"
    run_bench(recipe, drafts, run_dir, Reporter())
    run = read_run(run_dir)
    spec = {r.draft: r for r in run.rows if r.is_speculative}
    assert set(spec) == {"random", "ngram"}
    for r in spec.values():
        assert (r.prompts_budget, r.race_looks) == (24, 3) and r.race_exit in ("out", "settled", "budget")
        assert r.ok and r.speedup_ci_low is not None and r.num_prompts in (8, 16, 24), r.to_dict()
        sides = load_cell_requests(run_dir, r.cell_id)
        assert sides is not None
        ids = [sorted(x["request_id"] for x in sides[arm]) for arm in ("baseline", "speculative")]
        assert ids[0] == ids[1] and len(ids[0]) == r.num_prompts  # the baseline's rounds up to its exit, paired
    rand = spec["random"]
    assert rand.speedup is not None and rand.speedup < 1.0
    assert rand.race_exit == "out" and rand.num_prompts < 24, rand.to_dict()
    first = set(load_cell_requests(run_dir, rand.cell_id)["speculative"][i]["request_id"] for i in range(8))
    later = {x["request_id"] for x in load_cell_requests(run_dir, spec["ngram"].cell_id)["speculative"]}
    assert first <= later  # one draw order: the arm that left earlier saw a prefix of the later one's prompts
    (note,) = answer.race_notes(run.rows)
    assert note.startswith("code c=4 T=0: raced over 24 prompts (3 looks") and "random (eagle3) k=2 out after" in note
