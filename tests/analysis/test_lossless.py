"""Lossless at T = 0 (locate, measure, classify) and at T > 0 (the distribution test):
the pure core with literal numbers, and the test's calibration on synthetic samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.lossless import (
    NUMERICS,
    SPEC_BUG,
    UNEXPLAINED,
    Divergence,
    Margin,
    cell_lossless,
    classify,
    first_divergence,
    margin_at,
    noise_margin,
    top_n,
    verdict_meets,
)
from harness.analysis.lossless_sampling import (
    SampledToken,
    chi2_isf,
    chi2_sf,
    detectable_noncentrality,
    ks_sf,
    randomized_pit,
    sampling_fidelity,
)
from harness.schema import CellRow

# ---- T = 0: where, by how much, and why ----


def test_first_divergence_locates_position_and_both_tokens():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([], []) is None
    assert first_divergence([1, 2, 9, 4], [1, 2, 3, 4]) == Divergence(2, 9, 3)
    assert first_divergence([5], [1, 2]) == Divergence(0, 5, 1)
    # one output stops (EOS, a failed request) where the other goes on
    assert first_divergence([1, 2], [1, 2, 7]) == Divergence(2, None, 7)
    assert first_divergence([1, 2, 7], [1, 2]) == Divergence(2, 7, None)


def test_top_n_drops_the_sampled_token_vllm_appends():
    # vLLM returns top-2 plus the sampled token (id 9) when it is not in the top 2
    lps = {9: -5.0, 4: -0.1, 7: -2.5}
    assert top_n(lps, 2) == [(4, -0.1), (7, -2.5)]
    assert top_n({1: -1.0, 2: -1.0}, 1) == [(1, -1.0)]  # ties broken by token id


def test_margin_is_baseline_token_minus_spec_token_from_baseline_logprobs():
    lps = {11: -0.70, 12: -0.72, 13: -4.0}
    m = margin_at(lps, base_token=11, spec_token=12)
    assert m.nats == pytest.approx(0.02) and not m.is_lower_bound
    # the spec token outside the baseline's top-N: bounded below by the N-th logprob
    m = margin_at({11: -0.1, 12: -2.6}, base_token=11, spec_token=99)
    assert m.nats == pytest.approx(2.5) and m.is_lower_bound
    assert margin_at(None, 11, 12).nats is None
    assert margin_at(lps, 11, None).nats is None  # the speculative output ended here


def test_classify_against_noise_and_the_large_threshold():
    noise = 0.05
    assert classify(Margin(0.02), noise) == NUMERICS
    assert classify(Margin(0.05), noise) == NUMERICS
    assert classify(Margin(0.3), noise) == UNEXPLAINED  # above noise, below max(4 x 0.05, 0.5)
    assert classify(Margin(0.5), noise) == SPEC_BUG
    assert classify(Margin(0.6), 0.2) == UNEXPLAINED  # 4 x noise = 0.8 is the threshold
    assert classify(Margin(0.8), 0.2) == SPEC_BUG
    assert classify(Margin(0.02, is_lower_bound=True), noise) == UNEXPLAINED  # true margin unknown
    assert classify(Margin(3.0, is_lower_bound=True), noise) == SPEC_BUG
    assert classify(Margin(None), noise) == UNEXPLAINED


def test_noise_is_the_largest_gap_movement_or_self_divergence_between_baseline_runs():
    # request 0: same tokens; the top-1/top-2 gap is 1.00 in run A, 0.97 in run B -> 0.03
    a0 = ([5, 6], [{5: -0.2, 8: -1.2}, {6: -0.1, 3: -3.0}])
    b0 = ([5, 6], [{5: -0.21, 8: -1.18}, {6: -0.1, 3: -3.0}])
    # request 1: the runs diverge at position 1 where run A preferred 4 over 2 by 0.04
    a1 = ([1, 4], [{1: -0.01, 2: -5.0}, {4: -0.68, 2: -0.72}])
    b1 = ([1, 2], [{1: -0.01, 2: -5.0}, {2: -0.69, 4: -0.70}])
    assert noise_margin([a0, a1], [b0, b1]) == pytest.approx(0.04)
    assert noise_margin([a0], [a0]) == 0.0


def test_cell_flag_for_one_numerics_miss_matches_the_issue_format():
    base = [[1, 2, 3], [4, 5, 6]]
    spec = [[1, 2, 3], [4, 9, 6]]
    base_lps = [None, [{4: -0.1, 9: -3}, {5: -0.70, 9: -0.72}, {6: -0.1, 1: -3}]]
    cell = cell_lossless(["a", "b"], spec, base, base_lps, noise_nats=0.05)
    assert cell.verdict == NUMERICS and cell.first_position == 1
    assert cell.flag() == "NOT LOSSLESS: 1/2, first at token 1, margin 0.02 (NUMERICS; engine noise 0.05)"
    assert verdict_meets(cell.verdict, "numerics-only") and not verdict_meets(cell.verdict, "exact")
    cols = cell.columns()
    assert cols["lossless_verdict"] == NUMERICS and cols["lossless_first_position"] == 1
    (row,) = cols["lossless_divergences"]
    assert row["request_id"] == "b" and (row["spec_token"], row["base_token"]) == (9, 5)
    assert row["margin_nats"] == pytest.approx(0.02) and row["verdict"] == NUMERICS


def test_cell_takes_the_worst_verdict_and_counts_each():
    base = [[1, 2], [1, 2], [1, 2]]
    spec = [[1, 3], [7, 2], [1, 2]]
    lps = [[{1: -0.1, 7: -6}, {2: -0.50, 3: -0.51}]] * 3
    cell = cell_lossless(["a", "b", "c"], spec, base, lps, noise_nats=0.02)
    assert [d.verdict for d in cell.divergences] == [NUMERICS, SPEC_BUG]
    assert cell.verdict == SPEC_BUG and cell.first_position == 0
    assert cell.flag() == (
        "NOT LOSSLESS: 2/3, first at token 0, margins 0.01-5.9 (1 SPEC BUG, 1 NUMERICS; engine noise 0.02)"
    )
    assert not verdict_meets(cell.verdict, "numerics-only") and verdict_meets(cell.verdict, "none")


def test_identical_cell_has_no_flag_and_passes_exact():
    cell = cell_lossless(["a"], [[1, 2]], [[1, 2]], [None], noise_nats=None)
    assert cell.flag() is None and cell.verdict is None and verdict_meets(cell.verdict, "exact")


def test_unmeasured_noise_is_said_and_never_excuses_a_miss():
    cell = cell_lossless(["a"], [[3]], [[2]], [[{2: -0.69, 3: -0.70}]], noise_nats=None)
    assert cell.verdict == UNEXPLAINED
    assert cell.flag().endswith("(UNEXPLAINED; engine noise not measured)")


# ---- T > 0: the statistics, with textbook values ----


def test_chi_square_and_ks_tails_against_tables():
    assert chi2_sf(3.841459, 1) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(16.918978, 9) == pytest.approx(0.05, abs=1e-6)
    assert chi2_isf(0.01, 4) == pytest.approx(13.276704, abs=1e-4)
    assert chi2_sf(0.0, 3) == 1.0
    # Kolmogorov's 5 % critical value 1.3581 / sqrt(n), asymptotically
    n = 10_000
    assert ks_sf(1.3581 / (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)), n) == pytest.approx(0.05, abs=1e-4)


def test_detectable_noncentrality_matches_the_normal_formula_for_one_df():
    # chi-square(1) test = two-sided z test: lambda = (z_{0.975} + z_{0.8})^2
    assert detectable_noncentrality(1, 0.05, 0.8) == pytest.approx((1.959964 + 0.841621) ** 2, rel=1e-4)


def test_pit_of_the_one_token_the_model_emits():
    # p(T) = 1 - 1e-20: emitting T gives u in [0, 1); a junk token lands in "other", u ~ 1
    lps = {5: math.log1p(-1e-20), 6: -50.0}
    u, b = randomized_pit([SampledToken(5, lps), SampledToken(1234, lps)], num_top=2)
    assert b.tolist() == [0, 2]
    assert 0 <= u[0] < 1 and u[1] > 1 - 1e-12


# ---- T > 0: calibration on synthetic samples ----


def _synthetic(seed: int, n: int, vocab: int = 40, num_top: int = 5, distort=None) -> list[SampledToken]:
    """n positions, each a fresh peaked distribution over `vocab` tokens; the stated
    distribution is its exact top-`num_top` logprobs; the token is drawn from it, or from
    `distort(p)` to plant a sampler defect."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        logits = rng.normal(0.0, 2.5, vocab)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        q = distort(p, rng) if distort else p
        tok = int(rng.choice(vocab, p=q))
        top = np.argsort(-p)[:num_top]
        lps = {int(t): float(np.log(p[t])) for t in top}
        lps[tok] = float(np.log(p[tok]))  # as vLLM: the sampled token's logprob is always there
        out.append(SampledToken(tok, lps))
    return out


def test_exact_sampling_passes_with_uniform_p_values_across_seeds():
    ps = [sampling_fidelity(_synthetic(seed, 400), num_top=5, seed=seed).p_value for seed in range(40)]
    assert min(ps) > 0.001
    assert sum(p < 0.05 for p in ps) <= 6  # ~2 expected at 5 %; 6+ would be p < 0.01
    # the p-values themselves are uniform: KS against U(0,1) does not reject
    x = np.sort(ps)
    d = max((np.arange(1, 41) / 40 - x).max(), (x - np.arange(40) / 40).max())
    assert ks_sf(float(d), 40) > 0.05


def test_exact_sampling_reports_small_divergence_and_its_power():
    r = sampling_fidelity(_synthetic(0, 2000), num_top=5)
    assert r.num_samples == 2000 and r.num_bins == 10
    assert r.p_value > 0.01 and r.ks_p_value > 0.01
    assert r.tv_pit < r.min_detectable_tv
    # lambda*(9 df) = 15.65 -> sqrt(15.65 / 2000) / 2
    assert r.min_detectable_tv == pytest.approx(math.sqrt(15.6498 / 2000) / 2, rel=1e-3)
    assert sum(r.rank_observed) == pytest.approx(1.0) and sum(r.rank_expected) == pytest.approx(1.0)
    assert r.tv_rank < 0.05


def _tempered(p, rng):  # a sampler running at the wrong temperature
    q = p**1.5
    return q / q.sum()


def _junk(p, rng):  # the vLLM-CPU defect's shape: some tokens drawn uniformly from the vocabulary
    return 0.8 * p + 0.2 / len(p)


@pytest.mark.parametrize("distort", [_tempered, _junk])
def test_distorted_sampling_fails(distort):
    r = sampling_fidelity(_synthetic(1, 2000, distort=distort), num_top=5)
    assert r.p_value < 1e-4, r.summary()
    assert r.tv_pit > r.min_detectable_tv
    assert not r.passes(p_floor=0.01)


def test_junk_tokens_show_up_in_the_other_bucket():
    exact = sampling_fidelity(_synthetic(2, 2000), num_top=5)
    junk = sampling_fidelity(_synthetic(2, 2000, distort=_junk), num_top=5)
    assert junk.rank_observed[-1] - junk.rank_expected[-1] > exact.rank_observed[-1] - exact.rank_expected[-1] + 0.05


def test_too_few_samples_are_reported_not_tested():
    r = sampling_fidelity(_synthetic(0, 6), num_top=5)
    assert r.p_value is None and r.passes(0.5) and "too few" in r.summary()


def test_stated_power_holds_at_the_smallest_detectable_divergence():
    """Two equally likely tokens, the sampler favouring the first by delta: the PIT histogram
    is off by exactly TV = delta in the least detectable shape (w = 2 TV). At delta =
    min_detectable_tv the test must reject ~80 % of the time; at delta = 0 ~5 %."""
    n, reps = 500, 300
    lps = {1: math.log(0.5), 2: math.log(0.5)}
    delta = sampling_fidelity([SampledToken(1, lps)] * n, num_top=2).min_detectable_tv
    rng = np.random.default_rng(0)

    def rejection_rate(bias: float) -> float:
        hits = 0
        for rep in range(reps):
            toks = np.where(rng.random(n) < 0.5 + bias, 1, 2)
            r = sampling_fidelity([SampledToken(int(t), lps) for t in toks], num_top=2, seed=rep)
            hits += r.p_value < 0.05
        return hits / reps

    assert 0.72 <= rejection_rate(delta) <= 0.88
    assert rejection_rate(0.0) <= 0.09


def test_server_logprobs_are_read_by_token_id():
    from harness.engine.server import token_logprobs

    chunk = {
        "tokens": ["token_id:7"],
        "token_logprobs": [-0.1],
        "top_logprobs": [{"token_id:7": -0.1, "token_id:12": -2.4}],
    }
    assert token_logprobs(chunk) == [{7: -0.1, 12: -2.4}]
    assert token_logprobs(None) == []


# ----------------------------------------------------------------------------- T > 0 in a cell's rows


def _arm_from(samples: list[SampledToken], per_request: int = 50):
    from harness.bench.rows import ArmResult

    arm = ArmResult()
    for i in range(0, len(samples), per_request):
        arm.outputs[f"r{i}"] = [s.token for s in samples[i : i + per_request]]
        arm.num_output_tokens += len(samples[i : i + per_request])
    arm.wall_s = 1.0
    return arm


@pytest.mark.parametrize("distort, flagged", [(None, False), (_junk, True)])
def test_a_t_gt_0_cell_tests_both_arms_and_flags_a_sampler_that_departs(distort, flagged):
    from harness.bench.rows import cell_rows
    from tests.results_fixtures import identity

    ident = identity(temperature=0.8, rejection_sample_method="standard")
    base_s, spec_s = _synthetic(3, 2000), _synthetic(4, 2000, distort=distort)
    rb, rs = cell_rows(
        ident,
        _arm_from(base_s),
        _arm_from(spec_s),
        predicted_al=None,
        deterministic_verifier=False,
        mismatch_tolerance=0.1,
        num_top_logprobs=5,
        sampling_samples=(base_s, spec_s),
    )
    assert rb.sampling_num_tokens == rs.sampling_num_tokens == 2000
    assert rb.sampling_p_value > 0.001  # the baseline arm calibrates the test
    flags = [f for f in rs.flags if f.startswith("NOT LOSSLESS AT T>0")]
    assert bool(flags) == flagged and (rs.sampling_p_value < 1e-4) == flagged
    if flagged:
        assert f"divergence TV {rs.sampling_tv:.3f}" in flags[0] and "baseline arm p = " in flags[0]


def test_the_sampling_distribution_is_rebuilt_from_raw_logprobs_and_rescored_outputs_are_tested():
    from harness.analysis.lossless_sampling import processed, rescored_samples

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, 50)
    raw = dict(enumerate((logits - np.log(np.exp(logits).sum())).tolist()))
    t = 0.7
    q = np.exp(logits / t) / np.exp(logits / t).sum()
    got = processed(raw, t)
    assert np.allclose([math.exp(got[i]) for i in range(50)], q)
    nucleus = processed(raw, t, top_p=0.5)
    order = np.argsort(-q)
    inside = order[: int(np.searchsorted(np.cumsum(q[order]), 0.5)) + 1]  # the smallest set reaching 0.5
    assert {i for i, lp in nucleus.items() if lp > -math.inf} == set(inside.tolist())
    assert math.isclose(sum(math.exp(lp) for lp in nucleus.values()), 1.0)
    # tokens drawn from q pass; tokens drawn uniformly (the vLLM-CPU defect's shape) fail
    draws = rng.choice(50, size=600, p=q)
    ok = rescored_samples([draws.tolist()], [[raw] * 600], t, 1.0, num_top=5)
    junk = rescored_samples([rng.integers(0, 50, 600).tolist()], [[raw] * 600], t, 1.0, num_top=5)
    assert sampling_fidelity(ok, num_top=5).p_value > 0.001
    assert sampling_fidelity(junk, num_top=5).p_value < 1e-6


def test_at_t_1_a_top_n_rescore_gives_the_whole_vocabularys_samples():
    """At T = 1 without top-p the engines (a server included) return only their top tokens and the
    output's own (harness/bench/lossless_probes.py rescored_arms): the kept buckets equal the whole vocabulary's."""
    from harness.analysis.lossless_sampling import raw_is_sampling, rescored_samples, top_n

    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, 200)
    raw = dict(enumerate((logits - np.log(np.exp(logits).sum())).tolist()))
    draws = rng.choice(200, size=300, p=np.exp(list(raw.values()))).tolist()
    whole = rescored_samples([draws], [[raw] * 300], 1.0, 1.0, num_top=5)
    truncated = [{**dict(top_n(raw, 5)), d: raw[d]} for d in draws]  # what prompt_logprobs = 5 returns
    part = rescored_samples([draws], [truncated], 1.0, 1.0, num_top=5)
    assert raw_is_sampling(1.0, 1.0) and not raw_is_sampling(0.7, 1.0) and not raw_is_sampling(1.0, 0.9)
    for a, b in zip(whole, part, strict=True):
        assert a.token == b.token and a.logprobs.keys() == b.logprobs.keys()
        assert all(math.isclose(a.logprobs[k], b.logprobs[k], abs_tol=1e-9) for k in a.logprobs)
    assert math.isclose(sampling_fidelity(whole, num_top=5).p_value, sampling_fidelity(part, num_top=5).p_value)


def test_gate_holds_t_gt_0_cells_to_a_p_value_floor():
    from harness.results.gate.cell_checks import sampling_check

    base = {"suite": "chat", "k": 3, "concurrency": 1, "temperature": 0.8}
    row = {**base, "sampling_p_value": 0.002, "sampling_num_tokens": 900, "sampling_tv": 0.05}

    def check(b: dict, r: dict, floor: float | None):
        return sampling_check(CellRow.from_dict(b), CellRow.from_dict(r), floor)

    assert check(base, row, None) is None  # no floor, no check
    assert not check(base, row, 0.01).passed and check(base, row, 0.001).passed
    assert "p = 0.002 over 900 tokens" in check(base, row, 0.01).message()
    assert check({**base, "temperature": 0.0}, {**row, "temperature": 0.0}, 0.01) is None
