"""The canary's comparison, pure parts: when a change is flagged, how a T = 0 divergence is
classified, TPOT's paired ratio, and which version is named first."""

from __future__ import annotations

import pytest

from harness.results import canary as C
from harness.results.gate import paired as P


def _counts(accepted_per_request, k=3):
    return [
        P.RequestCounts(f"r{i}", 10, a, tuple(min(a, 10) for _ in range(k))) for i, a in enumerate(accepted_per_request)
    ]


def _estimate(new, ref):
    return P.paired_estimate(P.paired(_counts(new), _counts(ref)), -1, 0.05)


def test_identical_per_request_counts_are_no_change_and_a_shift_is():
    same = _estimate([5, 7, 9, 11, 6], [5, 7, 9, 11, 6])
    assert (same.low, same.high) == (0.0, 0.0) and not C.acceptance_changed([same])
    up = _estimate([9, 11, 13, 15, 10], [5, 7, 9, 11, 6])
    assert up.low > 0 and C.acceptance_changed([up])


def test_speedup_changes_only_when_the_intervals_part():
    a, b = C.Interval(1.2, 1.1, 1.3), C.Interval(1.25, 1.2, 1.4)
    assert not C.intervals_disjoint(a, b)
    assert C.intervals_disjoint(a, C.Interval(1.6, 1.5, 1.7))
    assert not C.intervals_disjoint(a, C.Interval(None, None, None))


def _rec(tokens):
    return {"output_token_ids": tokens}


def test_a_divergence_after_the_verifiers_own_is_the_verifiers():
    spec = (_rec([1, 2, 3, 4]), _rec([1, 2, 9, 9]))
    base = (_rec([1, 2, 3, 4]), _rec([1, 5, 9, 9]))  # the no-spec outputs part at 1, before 2
    d = C._divergence_kind("r0", spec, base, (None, None))
    assert d["position"] == 2 and d["kind"] == "verifier"


def test_a_divergence_where_the_verifier_agrees_is_speculations_with_the_engines_class():
    spec = (_rec([1, 2, 3, 4]), _rec([1, 2, 7, 7]))
    base = (_rec([1, 2, 3, 4]), _rec([1, 2, 3, 4]))
    d = C._divergence_kind("r0", spec, base, ("NUMERICS", "SPEC BUG"))
    assert d["kind"] == "speculation (SPEC BUG, new engine)"
    assert C._divergence_kind("r0", (spec[0], spec[0]), base, (None, None)) is None


def test_tpot_ratio_is_paired_on_the_same_requests():
    ref = {f"r{i}": {"output_token_ids": [0] * 11, "latency_s": 1.0 + i / 10, "ttft_s": 0.0} for i in range(8)}
    new = {k: {**v, "latency_s": 2 * v["latency_s"]} for k, v in ref.items()}
    ref_ms, new_ms, ratio = C.tpot_comparison(ref, new)
    assert new_ms == pytest.approx(2 * ref_ms) and ratio.point == pytest.approx(2.0)
    assert ratio.low == pytest.approx(2.0) and ratio.high == pytest.approx(2.0)  # the same factor on every request


def test_the_first_version_with_a_flag_is_named():
    quiet = C.CanaryCell("chat", "d", (), (C.Interval(1, 1, 1),) * 2, (1, 1), C.Interval(1, 1, 1), None)
    loud = C.CanaryCell(
        "chat", "d", (), (C.Interval(1, 1, 1),) * 2, (1, 1), C.Interval(1, 1, 1), None, ("OUTPUTS CHANGED",)
    )
    assert C.first_change([("0.31", [quiet]), ("0.32", [loud]), ("0.33", [loud])]) == "0.32"
    assert C.first_change([("0.31", [quiet])]) is None
