"""The headroom model's arithmetic (harness/analysis/headroom.py) on synthetic numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.headroom import (
    CostFit,
    Estimate,
    StepPoint,
    best_k,
    cells,
    conditional_rates,
    expected_al,
    fit_cost,
    geometric_rates,
    k_schedule,
    measured_best_k,
    place,
    pooled_rates,
    ratio_ci,
    within_share,
)

# a, v, s, d, e: 20 ms fixed, 2 ms per verify token, 4 ms to speculate at all, 3 ms + 0.5 ms per
# request per draft forward
TRUE = (0.020, 0.002, 0.004, 0.003, 0.0005)


def true_step(k: int, c: int) -> float:
    a, v, s, d, e = TRUE
    return a + v * c * (k + 1) + (s if k else 0.0) + k * (d + e * c)


def point(kind: str, k: int, c: int, noise: float = 0.0, al: float = 1.0, repeat: int = 0, pair: str = "") -> StepPoint:
    """A batch of 8 requests x 64 tokens at step time true_step * (1 + noise) and acceptance `al`."""
    tokens = 8 * 64
    steps = tokens / al
    wall = true_step(k, c) * (1 + noise) * steps / c
    drafts = steps if k else 0.0
    accepted = (round((al - 1) * drafts),) + (0,) * (k - 1) if k else ()
    return StepPoint(kind, k, c, wall, tokens, steps, None, accepted, repeat, drafts, pair)


def sweep(noise_sd: float = 0.0, seed: int = 0, repeats: int = 1) -> list[StepPoint]:
    """Every synthetic batch right after its baseline batch (the same pair name and repeat)."""
    rng = np.random.default_rng(seed)
    pts = []
    for k in (1, 2, 3, 4):
        for c in (1, 2, 4, 8):
            for al in (1.5, 2.5):
                for r in range(repeats):
                    pair = f"k{k}-al{al}"
                    pts.append(point("baseline", 0, c, float(rng.normal(0, noise_sd)), repeat=r, pair=pair))
                    spec = point("synthetic", k, c, float(rng.normal(0, noise_sd)), min(al, k + 1), r, pair)
                    pts.append(StepPoint(**{**spec.__dict__, "rates": (al,)}))
    return pts


def test_step_time_reads_c_wall_over_request_steps():
    p = point("synthetic", 3, 4, al=2.0)
    assert p.step_s == pytest.approx(true_step(3, 4))
    assert p.tokens_per_s == pytest.approx(4 * 2.0 / true_step(3, 4))
    b = point("baseline", 0, 4)
    assert b.acceptance_length == 1.0 and b.step_s == pytest.approx(true_step(0, 4))


def test_fit_recovers_exact_coefficients_without_noise():
    fit = fit_cost(sweep())
    assert fit.coef == pytest.approx(TRUE, rel=1e-6)
    assert fit.rms_rel_residual < 1e-9
    assert fit.ks == (0, 1, 2, 3, 4) and fit.concurrencies == (1, 2, 4, 8)


def test_fit_cis_cover_the_truth_with_noise():
    fit = fit_cost(sweep(noise_sd=0.02, seed=3))
    for name, true in zip(fit.terms, TRUE, strict=True):
        ci = fit.coef_ci()[name]
        assert ci.lo <= true <= ci.hi, name
    est = fit.step_s(3, 4)
    assert est.lo < true_step(3, 4) < est.hi


def test_speedup_is_al_times_baseline_step_over_spec_step():
    fit = fit_cost(sweep())
    for k, c, al in ((1, 1, 1.8), (3, 4, 2.6), (4, 8, 3.1)):
        s = fit.speedup(al, k, c)
        assert s.value == pytest.approx(al * true_step(0, c) / true_step(k, c), rel=1e-6)
        assert s.lo <= s.value <= s.hi
    # speedup rises linearly with AL at a given k and load
    assert fit.speedup(3.0, 3, 4).value == pytest.approx(2 * fit.speedup(1.5, 3, 4).value)


def test_al_for_target_inverts_speedup():
    fit = fit_cost(sweep(noise_sd=0.01, seed=1))
    al = fit.al_for(2.0, 3, 4)
    assert fit.speedup(al.value, 3, 4).value == pytest.approx(2.0)
    assert al.lo < al.value < al.hi


def test_fit_refuses_points_that_cannot_identify_it():
    one_load = [p for p in sweep() if p.concurrency == 4]
    with pytest.raises(ValueError, match="identify"):
        fit_cost(one_load)
    # one k cannot tell speculating at all from its k draft forwards
    with pytest.raises(ValueError, match="identify"):
        fit_cost([p for p in sweep() if p.k in (0, 2)])
    # the baseline and two ks at two loads are enough (a verify token costs what a baseline one does)
    two = [p for p in sweep() if p.k in (0, 1, 3) and p.concurrency in (2, 8)]
    assert fit_cost(two).coef == pytest.approx(TRUE, rel=1e-6)
    with pytest.raises(ValueError, match="cannot fit"):
        fit_cost(sweep()[:4])


def test_one_slow_batch_barely_moves_the_fit():
    """A burst of foreign load on one batch (10x slower) moves its cell's median, not the fit."""
    pts = sweep(repeats=3)
    i = next(i for i, p in enumerate(pts) if p.kind == "synthetic" and p.k == 3 and p.concurrency == 4)
    pts[i] = StepPoint(**{**pts[i].__dict__, "wall_s": pts[i].wall_s * 10})
    assert fit_cost(pts).coef == pytest.approx(TRUE, rel=1e-6)
    # and a drift shared by a pair (both batches 30 % slower) cancels in the pairing
    j = next(i for i, p in enumerate(pts) if p.kind == "synthetic" and p.k == 2 and p.concurrency == 8)
    for n in (j - 1, j):
        pts[n] = StepPoint(**{**pts[n].__dict__, "wall_s": pts[n].wall_s * 1.3})
    assert fit_cost(pts).coef == pytest.approx(TRUE, rel=1e-6)


def test_draft_points_are_never_fitted():
    pts = sweep()
    skewed = pts + [point("draft", 3, 4, noise=5.0, al=2.0)]
    assert fit_cost(skewed).coef == pytest.approx(fit_cost(pts).coef)


def test_fit_round_trips_through_json():
    fit = fit_cost(sweep(noise_sd=0.02))
    again = CostFit.from_dict(fit.to_dict())
    assert again == fit
    p = point("draft", 2, 4, al=2.2)
    assert StepPoint.from_dict(p.to_dict()) == p


def test_rates_and_expected_al():
    rates = geometric_rates(0.8, 3)
    assert rates == pytest.approx((0.8, 0.64, 0.512))
    assert conditional_rates(rates) == pytest.approx((0.8, 0.8, 0.8))
    assert expected_al(conditional_rates(rates), 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert expected_al((1.0, 1.0), 2) == 3.0 and expected_al((0.0, 1.0), 2) == 1.0
    with pytest.raises(ValueError):
        expected_al((0.5,), 2)


def test_ratio_ci_on_paired_repeats():
    est = ratio_ci([200.0, 210.0, 190.0], [100.0, 100.0, 100.0])
    assert est.value == pytest.approx(math.exp(np.mean(np.log([2.0, 2.1, 1.9]))))
    assert est.lo < 1.9 < est.value < 2.1 < est.hi
    single = ratio_ci([200.0], [100.0])
    assert single.value == pytest.approx(2.0) and math.isnan(single.lo)


def test_place_splits_the_gap_from_ideal_to_measured():
    fit = fit_cost(sweep())
    al = 2.5
    allowed = al * true_step(0, 4) / true_step(3, 4)
    measured = Estimate(0.9 * allowed, 0.85 * allowed, 0.95 * allowed)
    p = place(fit, 3, 4, al, measured)
    assert p.allowed.value == pytest.approx(allowed)
    assert p.efficiency == pytest.approx(0.9)
    assert not p.within
    verify_only = al * true_step(0, 4) / (true_step(0, 4) + TRUE[1] * 4 * 3)
    assert fit.split_s(3, 4)["draft_s"] == pytest.approx(TRUE[2] + 3 * (TRUE[3] + TRUE[4] * 4))
    assert p.gap["verify_overhead"] == pytest.approx(al - verify_only)
    assert p.gap["draft_cost"] == pytest.approx(verify_only - allowed)
    assert p.gap["ideal"] - p.gap["verify_overhead"] - p.gap["draft_cost"] - p.gap["rest"] == pytest.approx(
        measured.value
    )
    hit = place(fit, 3, 4, al, Estimate(allowed, 0.9 * allowed, 1.1 * allowed))
    # the prediction uses the tokens per request-step the throughput saw when given
    seen = place(fit, 3, 4, al, measured, tokens_per_step=2.4)
    assert seen.allowed.value == pytest.approx(allowed * 2.4 / 2.5) and seen.acceptance_length == al
    assert hit.within and within_share([p, hit]) == 0.5


def test_best_k_follows_the_cost_at_each_load():
    fit = fit_cost(sweep())
    cond = (0.9, 0.9, 0.9, 0.9)
    expect = {}
    for c in (1, 8):
        speedups = {k: expected_al(cond, k) * true_step(0, c) / true_step(k, c) for k in (1, 2, 3, 4)}
        expect[c] = max(speedups, key=lambda k: speedups[k])
        choice, options = best_k(fit, cond, (1, 2, 3, 4), c)
        assert choice.k == expect[c]
        assert [o.k for o in options] == [1, 2, 3, 4]
    # a draft that rarely gets past its first token gains nothing from more
    low, _ = best_k(fit, (0.5, 0.05, 0.05, 0.05), (1, 2, 3, 4), 8)
    assert low.k == 1
    # ks beyond the rates known are skipped
    _, opts = best_k(fit, (0.9, 0.9), (1, 2, 3), 1)
    assert [o.k for o in opts] == [1, 2]


def test_k_schedule_covers_every_batch_size():
    assert k_schedule({1: 4, 4: 3, 16: 1}) == ((1, 3, 4), (4, 15, 3), (16, 1024, 1))


def test_cells_pair_each_batch_with_its_baseline():
    pts = []
    for r, (s, b) in enumerate(((2.0, 1.0), (2.2, 1.0), (1.8, 1.0))):
        base = point("baseline", 0, 4, pair="k3-draft", repeat=r)
        spec = point("draft", 3, 4, al=2.5, pair="k3-draft", repeat=r)
        # rescale walls to the wanted tokens/s ratio
        spec = StepPoint(**{**spec.__dict__, "wall_s": base.wall_s * b / s})
        pts += [base, spec]
    (cell,) = cells(pts)
    assert cell.kind == "draft" and cell.k == 3 and cell.concurrency == 4
    assert cell.speedup.value == pytest.approx(math.exp(np.mean(np.log([2.0, 2.2, 1.8]))))
    assert cell.acceptance_length == pytest.approx(2.5, abs=0.01)
    assert cell.tokens_per_step == pytest.approx(2.5)  # output tokens / request-steps
    assert pooled_rates(pts) == pytest.approx((1.5, 0.0, 0.0), abs=0.01)
    assert measured_best_k([cell], 4) == (3, False)
    assert measured_best_k([cell], 1) is None
