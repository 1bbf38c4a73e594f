"""AL at every k' <= k from one engine's per-step records (harness/analysis/k_sweep.py): exact where
it must be, and a hand-worked replay. The comparison with separate engines on the stand-in is
bench/k_from_one_engine.py (real vLLM-CPU engines)."""

from __future__ import annotations

import pytest

from harness.analysis.k_sweep import REPLAYED, TRUNCATED, al_for_k, is_exact, replayed, truncated
from harness.analysis.steps import RequestSteps
from harness.errors import BadInput

# k = 4: the second step accepted all 4 (its run continues through the bonus into the third, which
# accepted none); output positions 1, 4, 9, 10, ending before 12.
WORKED = RequestSteps(accepted=(2, 4, 0, 1), drafted=(4, 4, 4, 4), num_spec_tokens=4)


@pytest.mark.parametrize("estimate", [truncated, replayed])
def test_the_engines_own_k_gives_back_the_recorded_steps(estimate):
    assert estimate(WORKED, 4).accepted == WORKED.accepted and estimate(WORKED, 4).drafted == WORKED.drafted
    assert is_exact(4, 4) and not is_exact(3, 4)


def test_replay_worked_by_hand():
    # k'=2: from 1 (run 2) accept 2 -> 4 (run 5) accept 2 -> 7 (run 2) accept 2 -> 10 (run 1) accept 1 -> 12
    assert replayed(WORKED, 2).accepted == (2, 2, 2, 1)
    # k'=1: 1 (2) -> 3 (0) -> 4 (5) -> 6 (3) -> 8 (1) -> 10 (1) -> 12
    assert replayed(WORKED, 1).accepted == (1, 0, 1, 1, 1, 1)
    assert truncated(WORKED, 2).accepted == (2, 2, 0, 1)
    assert al_for_k([WORKED], 2, REPLAYED).acceptance_length == pytest.approx(1 + 7 / 4)
    assert al_for_k([WORKED], 2, TRUNCATED).acceptance_length == pytest.approx(1 + 5 / 4)


@pytest.mark.parametrize("method", [TRUNCATED, REPLAYED])
def test_a_draft_that_always_or_never_accepts_is_exact_at_every_k(method):
    oracle = [RequestSteps((4,) * n, (4,) * n, num_spec_tokens=4) for n in (3, 5, 7)]
    rand = [RequestSteps((0,) * n, (4,) * n, num_spec_tokens=4) for n in (3, 5, 7)]
    for k in range(1, 5):
        assert al_for_k(oracle, k, method).acceptance_length == k + 1
        assert al_for_k(rand, k, method).acceptance_length == 1.0
        assert (
            al_for_k(oracle, k, method).counters.accepted_per_pos
            == (al_for_k(oracle, k, method).counters.num_drafts,) * k
        )


def test_a_draft_cut_short_keeps_its_room():
    cut = RequestSteps(accepted=(1, 2), drafted=(4, 2), num_spec_tokens=4)  # the last step had room for 2
    assert replayed(cut, 3).drafted == (3, 2)
    assert replayed(cut, 3).accepted == (1, 2)


def test_per_request_ci_and_bad_k():
    reqs = [
        WORKED,
        RequestSteps((1, 3, 0), (4, 4, 4), num_spec_tokens=4),
        RequestSteps((4, 4), (4, 4), num_spec_tokens=4),
    ]
    split = al_for_k(reqs, 3)
    assert split.ci is not None and split.ci[0] <= split.acceptance_length <= split.ci[1]
    assert split.num_requests == 3
    for bad in (0, 5):
        with pytest.raises(BadInput, match="outside 1..4"):
            replayed(WORKED, bad)
    with pytest.raises(BadInput, match="not one of"):
        al_for_k(reqs, 2, "guess")


# ----------------------------------------------------------------------------- bench.k_from_one_engine


def test_the_recipe_plans_one_engine_per_draft_and_the_dry_run_counts_the_starts_saved():
    from harness.bench.grid import plan_grid
    from harness.plan.stages import bench_count, bench_work
    from harness.recipe import load_recipe
    from tests.plan.test_cost import _bench_recipe

    sweep = ["bench.k=[1,2,3,4]", "bench.k_from_one_engine=true"]
    cells = plan_grid(load_recipe(None, sweep).bench, ["d"], ["code"], {})
    assert {c.k for c in cells} == {4}
    suites = (("code", 3), ("math", 5))
    one, every = bench_count(_bench_recipe(*sweep), suites), bench_count(_bench_recipe("bench.k=[1,2,3,4]"), suites)
    assert (one.engines, every.engines, one.starts_saved, every.starts_saved) == (2, 5, 3, 0)
    assert (
        "2 engine starts (3 saved: k < 4 estimated from one engine)" in bench_work(_bench_recipe(*sweep), one, 1).work
    )
    with pytest.raises(Exception, match="turn one of them off"):
        load_recipe(None, [*sweep, "bench.dynamic_k=true"])


def test_the_largest_k_cell_carries_al_at_every_smaller_k():
    from harness.bench.rows import cell_rows
    from tests.bench.test_breakdown import IDENT, _arms

    base, spec = _arms()
    kw = dict(predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    _, off = cell_rows(IDENT, base, spec, **kw)
    _, on = cell_rows(IDENT, base, spec, **kw, k_sweep=True)
    assert not off.breakdowns.k and on.breakdowns.k.labels == ["k=1", "k=2", "k=3"]
    by_k = on.breakdowns.k.buckets
    assert by_k[-1].al == pytest.approx(on.acceptance_length)  # k' = k: the cell's own steps
    assert by_k[-1].drafts == on.num_drafts
    assert all(b.ci_low <= b.al <= b.ci_high for b in by_k)
    assert on.breakdowns.k.als == sorted(on.breakdowns.k.als)  # more proposals never lower AL here
