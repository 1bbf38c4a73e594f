"""Gate power (harness/analysis/power.py)."""

from __future__ import annotations

import math

import pytest

from harness.analysis import power
from harness.errors import BadInput
from harness.metrics import bootstrap_ci

# 8 prompts at k=3, ~32 verify steps each, per-request AL spread as the demo's suites show (2.2-3.8)
DRAFTS = [31, 36, 28, 44, 26, 33, 30, 40]
PER_REQUEST_AL = [3.1, 2.6, 3.5, 2.2, 3.8, 2.9, 3.3, 2.4]
ACCEPTED = [round((al - 1) * d) for al, d in zip(PER_REQUEST_AL, DRAFTS)]


def test_eight_prompts_cannot_detect_a_five_percent_drop_and_say_how_many_could():
    al, se, n = power.se_from_per_request_al(PER_REQUEST_AL)
    assert (al, n) == (pytest.approx(2.975), 8)
    assert se == pytest.approx(0.55485 / math.sqrt(8), rel=1e-4)
    p = power.gate_power(al, se, n, tolerance=0.05)
    # MDD = (1.645 + 0.842) * 0.1962 / 2.975
    assert p.min_detectable_drop == pytest.approx(0.16396, rel=1e-3)
    assert not p.detects_tolerance
    assert p.prompts_needed == 87  # ceil(8 * (0.16396 / 0.05)^2) = ceil(86.03)
    assert p.warning() == (
        "cannot detect a 5% AL drop with 8 prompts (smallest detectable 16.4% at 95.0% "
        "confidence, 80% power); about 87 prompts would"
    )
    # the same spread over the prompts it asks for does detect the tolerance
    bigger = power.gate_power(al, se * math.sqrt(8 / p.prompts_needed), p.prompts_needed, tolerance=0.05)
    assert bigger.detects_tolerance and bigger.warning() is None


def test_counts_ratio_se_agrees_with_the_bootstrap_ci_width():
    al, se, n = power.se_from_counts(ACCEPTED, DRAFTS)
    assert al == pytest.approx(1 + sum(ACCEPTED) / sum(DRAFTS))
    lo, hi = bootstrap_ci(ACCEPTED, DRAFTS, num_resamples=4000)
    # the bootstrap shrinks by sqrt((n-1)/n); within 20 % of the analytic SE
    assert power.se_from_ci(lo, hi) == pytest.approx(se, rel=0.2)
    p = power.gate_power(al, se, n, tolerance=0.05)
    assert not p.detects_tolerance and p.prompts_needed > 40


def test_a_noisy_baseline_and_the_noise_aware_confidence_raise_the_detectable_drop():
    base = power.min_detectable_drop(3.0, 0.05)
    assert base == pytest.approx((1.6449 + 0.8416) * 0.05 / 3.0, rel=1e-4)
    assert power.min_detectable_drop(3.0, 0.05, baseline_se=0.05) == pytest.approx(base * math.sqrt(2))
    assert power.min_detectable_drop(3.0, 0.05, confidence=power.NOISE_AWARE_CONFIDENCE) > base


def test_large_suites_detect_small_drops():
    p = power.gate_power(3.0, 0.02, 80, tolerance=0.05)
    assert p.detects_tolerance and p.min_detectable_drop == pytest.approx(0.01658, rel=1e-3)


def test_too_little_input_is_refused():
    with pytest.raises(BadInput):
        power.se_from_per_request_al([3.0])
    with pytest.raises(BadInput):
        power.se_from_counts([5, 0], [3, 0])
    with pytest.raises(BadInput):
        power.prompts_needed(0.1, 8, 0.0)
