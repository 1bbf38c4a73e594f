"""The paired gate's pure checks and its group-sequential looks (harness/results/gate/paired.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.results.gate import paired as P


def _requests(n: int, seed: int, k: int = 3, p_accept: float = 0.6) -> list[P.RequestCounts]:
    """Synthetic requests: 30 drafted steps each, a prompt-level acceptance varying a lot between prompts."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = float(np.clip(rng.normal(p_accept, 0.2), 0.05, 0.95))
        runs = np.minimum(rng.geometric(1 - p, 30) - 1, k)  # accepted per step, prefix-closed
        out.append(P.RequestCounts(f"r{i}#0", 30, int(runs.sum()), tuple(int((runs > j).sum()) for j in range(k))))
    return out


def test_counts_of_reads_per_step_arrays_and_skips_undrafted_steps():
    rec = {"request_id": "chat-3", "repeat": 1, "accepted": [3, 0, 1, 2, 0], "drafted": [3, 3, 3, 3, 0]}
    c = P.counts_of(rec, 3)
    assert (c.request_id, c.drafts, c.accepted, c.per_pos) == ("chat-3#1", 4, 6, (3, 2, 1))


def test_a_draft_against_itself_passes_and_the_difference_is_zero():
    reqs = _requests(40, 0)
    est = P.paired_estimate(P.paired(reqs, reqs), -1, 0.05)
    assert est is not None
    assert est.diff == 0 and est.se < 1e-12 and est.verdict == "pass" and est.prompts_needed is None


def test_a_large_drop_fails_and_a_slight_one_is_inconclusive_with_the_prompts_it_would_take():
    base = _requests(40, 1)
    rng = np.random.default_rng(2)
    worse = [r.scaled(0.6, rng) for r in base]  # AL ~2.3 -> ~1.8: a drop far beyond 5 %
    est = P.paired_estimate(P.paired(worse, base), -1, 0.05)
    assert est is not None and est.verdict == "fail" and est.high < -0.05
    few = P.paired(base[:4], [r.scaled(0.93, rng) for r in base[:4]])  # 4 prompts, a small difference
    est2 = P.paired_estimate([(b, c) for c, b in few], -1, 0.05)
    assert est2 is not None
    if est2.verdict == "inconclusive":
        assert est2.prompts_needed is None or est2.prompts_needed > 4


def test_a_rate_too_small_to_move_al_by_the_tolerance_is_reported_not_gated():
    """SmolLM2's draft (AL 1.13): its position-3 rate 0.006 -> 0.004 read -42 % over 87 pairs and
    failed a cell whose AL rose. A rate below tolerance x AL cannot move AL by the tolerance."""
    base = _requests(60, 3, p_accept=0.08)  # AL ~1.1: position 3 accepted in a handful of steps
    rng = np.random.default_rng(4)
    cand = [
        P.RequestCounts(r.request_id, r.drafts, r.accepted - r.per_pos[2] + n3, (*r.per_pos[:2], n3))
        for r in base
        if (n3 := int(rng.binomial(r.per_pos[2], 0.3))) is not None
    ]
    pairs = P.paired(cand, base)
    al = P.paired_estimate(pairs, -1, 0.05)
    pos3 = P.paired_estimate(pairs, 2, 0.05)
    assert al is not None and pos3 is not None and al.verdict == "pass"
    assert pos3.baseline < 0.05 * al.baseline and pos3.high < -0.05  # a shown drop of a tiny rate
    assert pos3.verdict == "immaterial" and pos3.prompts_needed is None
    assert P.cell_verdict([al, pos3]) == "pass"
    # the same relative drop of a material rate still fails the cell
    rich = _requests(60, 3, p_accept=0.6)
    worse = [
        P.RequestCounts(
            r.request_id, r.drafts, r.accepted - r.per_pos[2] + r.per_pos[2] // 3, (*r.per_pos[:2], r.per_pos[2] // 3)
        )
        for r in rich
    ]
    pos3_rich = P.paired_estimate(P.paired(worse, rich), 2, 0.05)
    assert pos3_rich is not None and pos3_rich.verdict == "fail"


def test_pairing_uses_only_request_ids_both_arms_finished():
    a, b = _requests(5, 3), _requests(5, 4)
    pairs = P.paired(a[:4], b[1:])
    assert [c.request_id for c, _ in pairs] == ["r1#0", "r2#0", "r3#0"]


def test_the_paired_se_is_far_below_either_arms_own_spread():
    """The point of pairing: prompts vary a lot, the same prompt through two close drafts little."""
    base = _requests(40, 5)
    rng = np.random.default_rng(6)
    cand = [r.scaled(0.97, rng) for r in base]
    est = P.paired_estimate(P.paired(cand, base), -1, 0.05)
    al = np.array([1 + r.accepted / r.drafts for r in base])
    assert est is not None and est.se < 0.5 * al.std(ddof=1) / math.sqrt(40) / al.mean()


def test_fixed_design_error_rates_on_replayed_nulls():
    """At the tolerance a candidate passes <= alpha (+ simulation slack); at no drop it never fails."""
    base = _requests(200, 7)
    rng = np.random.default_rng(8)
    al = 1 + sum(r.accepted for r in base) / sum(r.drafts for r in base)
    keep_at_tol = 1 - 0.05 * al / (al - 1)
    passes_at_tol = fails_at_zero = 0
    draws = 200
    for _ in range(draws):
        idx = rng.integers(0, len(base), 40)
        sample = [base[i] for i in idx]
        ids = [P.RequestCounts(f"{j}", s.drafts, s.accepted, s.per_pos) for j, s in enumerate(sample)]
        cand = [r.scaled(keep_at_tol, rng) for r in ids]
        e = P.paired_estimate(P.paired(cand, ids), -1, 0.05)
        assert e is not None
        passes_at_tol += e.verdict == "pass"
        e0 = P.paired_estimate(P.paired(ids, ids), -1, 0.05)
        fails_at_zero += e0 is not None and e0.verdict == "fail"
    assert passes_at_tol / draws <= 0.10 and fails_at_zero == 0


def test_cell_and_overall_verdicts():
    def est(v: P.Verdict) -> P.PairedEstimate:
        return P.PairedEstimate("m", 2, 2, 0, 0, 0, 0, 10, 0.05, 0.01, v, None)

    assert P.cell_verdict([est("pass"), est("inconclusive")]) == "pass"
    assert P.cell_verdict([est("inconclusive"), est("pass")]) == "inconclusive"
    assert P.cell_verdict([est("pass"), est("fail")]) == "fail"
    assert P.overall_verdict(["pass", "inconclusive"]) == "inconclusive"
    assert P.overall_verdict(["pass", "fail", "inconclusive"]) == "fail"
    assert P.overall_verdict([]) == "inconclusive"


def test_the_spending_boundaries_are_lan_demets_pococks():
    """Five equally spaced looks at one-sided 0.025 with the Pocock-type spending function: the published
    boundaries (gsDesign's sfLDPocock: 2.4380 2.4268 2.4101 2.3966 2.3859); one look is the fixed z."""
    got = P.boundaries(tuple(j / 5 for j in range(1, 6)), 0.025)
    assert got == pytest.approx((2.4380, 2.4268, 2.4101, 2.3966, 2.3859), abs=2e-4)
    assert P.boundaries((1.0,), 0.05) == pytest.approx((1.6449,), abs=1e-4)


def test_uneven_looks_spend_exactly_their_share_of_alpha():
    """Looks wherever rounds put them (multi-turn prompts make uneven steps): simulated Brownian paths
    cross each boundary first with the probability the spending function allots it."""
    fractions = (0.2, 0.3, 0.35, 0.7, 1.0)
    b = np.array(P.boundaries(fractions, 0.05))
    rng = np.random.default_rng(0)
    steps = rng.standard_normal((200_000, len(fractions))) * np.sqrt(np.diff((0.0, *fractions)))
    z = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = (z > b).any(axis=1)
    first = np.where(crossed, (z > b).argmax(axis=1), len(fractions))
    for j, t in enumerate(fractions):
        assert (first <= j).mean() == pytest.approx(P.spent(t, 0.05), abs=0.0015)


def test_a_look_is_wider_than_the_fixed_interval_and_counts_the_looks_before_it():
    u = np.tile([-1.0, 1.0], 20) * 0.05  # no skew: the plain t interval
    fixed = P.interval(0.0, u, P._normal_quantile(P.ALPHA))
    alone = P.interval(0.0, u, P.Looks(40, (40,)).boundary())
    after = P.interval(0.0, u, P.Looks(40, (16, 24, 32, 40)).boundary())
    se = float(np.std(u, ddof=1)) / math.sqrt(40)
    assert fixed[1] == pytest.approx(1.6849 * se, rel=1e-3)  # t_{0.95, 39}
    assert alone == pytest.approx(fixed, rel=1e-3)  # one look at the budget is the fixed test
    assert after[1] > alone[1]  # earlier looks spent some of alpha


def test_the_interval_removes_the_skew_that_makes_a_t_interval_err_on_one_side():
    """A candidate exactly at the tolerance over skewed requests (the synthetic requests' acceptance varies
    a lot between prompts): the symmetric t interval passes it more often than it fails it, and more than
    alpha at 16 requests; the skew-corrected interval errs about alpha on each side."""
    base = _requests(300, 11)
    rng = np.random.default_rng(12)
    al = 1 + sum(r.accepted for r in base) / sum(r.drafts for r in base)
    keep = 1 - 0.05 * al / (al - 1)
    plain, corrected, draws = np.zeros(2), np.zeros(2), 1500
    for _ in range(draws):
        idx = rng.integers(0, len(base), 16)
        ids = [P.RequestCounts(f"{j}", base[i].drafts, base[i].accepted, base[i].per_pos) for j, i in enumerate(idx)]
        _, _, d, u = P.relative_difference(P.metric_arrays(P.paired([r.scaled(keep, rng) for r in ids], ids), -1), 1.0)
        half = 1.7531 * float(np.std(u, ddof=1)) / 4  # t_{0.95, 15}
        for tally, (low, high) in ((plain, (d - half, d + half)), (corrected, P.interval(d, u, 1.6449))):
            tally += (low > -0.05, high < -0.05)
    assert plain[0] / draws > 0.06 and plain[0] > 1.5 * plain[1]  # the t interval's one-sided error
    assert abs(corrected[0] - corrected[1]) / draws < 0.015 and max(corrected) / draws < 0.065


@pytest.mark.parametrize("keep, expect", [(1.0, "pass"), (0.5, "fail")])
def test_sequential_stops_early_when_the_verdict_is_clear(keep, expect):
    base = _requests(80, 9)
    rng = np.random.default_rng(10)
    cand = [r.scaled(keep, rng) for r in base]
    res = P.sequential_verdict(P.paired(cand, base), 0.05, round_size=8, max_prompts=80)
    assert res.verdict == expect and res.n_used < 80 and res.looks >= 1


def test_sequential_false_alarms_stay_below_alpha_over_many_looks():
    """A candidate exactly at the tolerance, looked at after every 4 prompts up to 80 (17 looks): passing
    it (the wrong verdict) stays near alpha, where naive repeated t tests would inflate it."""
    base = _requests(300, 11)
    rng = np.random.default_rng(12)
    al = 1 + sum(r.accepted for r in base) / sum(r.drafts for r in base)
    keep = 1 - 0.05 * al / (al - 1)
    wrong, draws = 0, 200
    for _ in range(draws):
        idx = rng.integers(0, len(base), 80)
        ids = [P.RequestCounts(f"{j}", base[i].drafts, base[i].accepted, base[i].per_pos) for j, i in enumerate(idx)]
        res = P.sequential_verdict(P.paired([r.scaled(keep, rng) for r in ids], ids), 0.05, 4, 80)
        wrong += res.verdict == "pass"
    assert wrong / draws <= 0.08


def test_one_look_is_the_replays_look_at_the_same_pairs():
    """The bench looks once per round (paired.look); the replay's sequential_verdict looks at the same
    pairs with the same boundaries, so the two agree on where a round-drawn cell stops."""
    base = _requests(80, 13)
    rng = np.random.default_rng(14)
    pairs = P.paired([r.scaled(0.5, rng) for r in base], base)
    replay = P.sequential_verdict(pairs, 0.05, round_size=8, max_prompts=80)
    looks = P.Looks(80, tuple(range(16, replay.n_used + 1, 8)))
    seen = P.look(pairs[: replay.n_used], 0.05, looks)
    assert seen == replay and replay.verdict == "fail" and replay.looks == len(looks.at)
    assert P.look(pairs[:1], 0.05, P.Looks(80, (1,))) is None  # one pair has no spread to look at


def test_a_round_drawn_cell_is_judged_at_the_look_it_stopped_on_not_by_the_t_interval():
    """After an optional stop the fixed t interval does not hold its error rates; the estimate of a
    cell drawn in rounds is its last look's repeated confidence interval, wider, and says so."""
    base = _requests(24, 15)
    rng = np.random.default_rng(16)
    pairs = P.paired([r.scaled(0.97, rng) for r in base], base)
    looks = P.Looks(40, (16, 24))
    fixed = P.paired_estimate(pairs, -1, 0.05)
    seq = P.paired_estimate(pairs, -1, 0.05, looks=looks)
    assert fixed is not None and seq is not None
    assert seq.sequential and not fixed.sequential and seq.diff == fixed.diff
    assert seq.low < fixed.low and seq.high > fixed.high
    assert seq.verdict == P.look(pairs, 0.05, looks).verdict  # type: ignore[union-attr]
