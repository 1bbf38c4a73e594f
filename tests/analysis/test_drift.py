"""The soak's trend test (issue 27 item 4), pure: a planted acceptance drift in a synthetic series of
soak windows is flagged with its slope per hour, through the same code the soak runs
(harness/soak.py verdict / soak_exit / render_soak over harness/analysis/drift.py); a steady series,
a significant but negligible slope and too few windows are not. The folder's resume rules too. The
real soak runs in tests/e2e/test_open_loop_engine.py."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from rich.console import Console

from harness.analysis import drift
from harness.errors import BadInput
from harness.soak import SoakSettings, Window, open_soak, render_soak, soak_exit, verdict, window_conversations

WINDOW_S = 600.0  # ten-minute windows over a four-hour soak


def _windows(als) -> list[Window]:
    return [
        Window(
            index=i,
            session=0,
            start_s=i * WINDOW_S,
            duration_s=WINDOW_S,
            at="2026-12-04T00:00:00+00:00",
            requests=600,
            failed=0,
            output_tokens=38_400,
            num_drafts=10_000,
            num_draft_tokens=30_000,
            num_accepted_tokens=round((al - 1) * 10_000),
            acceptance_length=float(al),
            tpot_ms_p50=20.0,
            tpot_ms_p99=30.0,
            ttft_ms_p99=100.0,
            output_tok_per_s=500.0,
            prefix_cache_hit_rate=0.6,
            rss_mib=4000.0 + i,
            baseline_requests=150,
            baseline_tpot_ms_p50=40.0,
            baseline_rss_mib=3500.0,
            speedup=2.0,
        )
        for i, al in enumerate(als)
    ]


def _noise(n: int, sd: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sd, n)


def test_a_planted_decay_is_flagged_with_its_slope_per_hour_and_exits_1():
    """AL decaying 3.2 -> 2.6 over four hours (0.15/h, the shape reported with prefix caching on)."""
    hours = (np.arange(24) + 0.5) * WINDOW_S / 3600
    windows = _windows(3.2 - 0.15 * hours + _noise(24, 0.03, seed=1))
    tr = verdict(windows)
    assert tr is not None and tr.drifting
    assert tr.ci[1] < 0 and tr.ci[0] < -0.15 < tr.ci[1]  # the CI holds the planted slope
    assert soak_exit(windows) == 1
    out = io.StringIO()
    render_soak(__import__("pathlib").Path("soak"), windows, Console(file=out, width=200))
    assert drift.DRIFT in out.getvalue() and "/h" in out.getvalue()


def test_a_steady_series_is_not_flagged_and_exits_0():
    windows = _windows(3.0 + _noise(24, 0.03, seed=2))
    tr = verdict(windows)
    assert tr is not None and not tr.drifting and tr.ci[0] <= 0 <= tr.ci[1]
    assert soak_exit(windows) == 0 and "no acceptance drift" in drift.describe(tr)


def test_identical_windows_have_a_zero_slope_and_no_flag():
    """T = 0 with the same traffic every window: the same AL each time."""
    tr = verdict(_windows([3.1] * 6))
    assert tr is not None and tr.slope_per_h == 0 and tr.ci == (0.0, 0.0) and not tr.drifting


def test_the_trend_is_the_ols_slope_with_its_t_interval():
    """The docstring's formulas, by hand: slope, se = sqrt(Σ residual² / (n − 2) / Σ (t − t̄)²), t quantile."""
    t = np.array([0.1, 0.4, 0.5, 0.9, 1.3, 1.6])
    v = np.array([3.0, 2.95, 2.97, 2.9, 2.86, 2.85])
    tr = drift.trend(t, v)
    sxx = ((t - t.mean()) ** 2).sum()
    slope = ((t - t.mean()) * (v - v.mean())).sum() / sxx
    resid = v - (v.mean() + slope * (t - t.mean()))
    half = 2.7764451051977987 * np.sqrt((resid**2).sum() / 4 / sxx)  # t(0.975, 4 df)
    assert tr is not None and tr.slope_per_h == pytest.approx(slope, rel=1e-12)
    assert tr.ci == pytest.approx((slope - half, slope + half), rel=1e-9)
    assert (tr.first, tr.last, tr.mean) == pytest.approx(
        (v.mean() + slope * (0.1 - t.mean()), v.mean() + slope * (1.6 - t.mean()), v.mean())
    )
    assert drift.trend([1.0] * 5, [3.0, 2.0, 1.0, 4.0, 2.0]) is None  # no spread in time


def test_a_significant_but_negligible_slope_is_not_flagged():
    """A long, quiet soak makes a tiny slope significant: under 2 % of AL over the soak is no page."""
    hours = (np.arange(200) + 0.5) * WINDOW_S / 3600
    tr = verdict(_windows(3.0 - 0.001 * hours + _noise(200, 0.0005, seed=3)))
    assert tr is not None and tr.ci[1] < 0  # significant
    assert not tr.drifting and "under 2%" in drift.describe(tr)


def test_too_few_windows_give_no_verdict():
    assert verdict(_windows([3.0, 2.0, 1.5])) is None
    assert soak_exit(_windows([3.0, 2.0, 1.5])) == 0
    assert "fewer than 4 windows" in drift.describe(None)


def test_a_folder_holding_another_soak_is_refused_and_the_same_one_resumes(tmp_path):
    settings = SoakSettings(minutes=1, request_rate=4, window_s=10, k=3, concurrency=4, temperature=0)
    ident = {**settings.identity(), "draft": {"x": "1"}, "verifier": "v", "recipe": "r"}
    state = open_soak(tmp_path, ident, settings)
    assert state["windows"] == [] and (tmp_path / "soak.json").is_file()
    longer = replace(settings, minutes=5)  # the duration may grow: a resume
    assert open_soak(tmp_path, {**longer.identity(), **{k: ident[k] for k in ("draft", "verifier", "recipe")}}, longer)
    other = replace(settings, request_rate=8)
    with pytest.raises(BadInput, match="holds another soak.*request_rate"):
        open_soak(tmp_path, {**other.identity(), "draft": {"x": "1"}, "verifier": "v", "recipe": "r"}, other)


def test_window_conversations_fill_the_window_with_unique_request_ids():
    from harness.prompts import PromptRecord

    convs = [(PromptRecord(id=f"c{i}", prompt="x"), [1, 2]) for i in range(3)]
    batch = window_conversations(convs, 7)
    assert [r.id for r, _ in batch] == ["c0", "c1", "c2", "c0~1", "c1~1", "c2~1", "c0~2"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "harness soak needs --draft DIR"),
        (["--draft", "/nonexistent-draft", "--request-rate", "4"], "not a draft checkpoint"),
        (["--draft", "{draft}", "--request-rate", "4"], "corrupt safetensors header"),
        (["--draft", "{draft}"], "needs --request-rate R"),  # the default recipe has no bench.request_rate
    ],
)
def test_soak_refuses_bad_input_in_one_line_with_exit_2(args, says, tmp_path, capsys, monkeypatch):
    import sys

    from harness.cli.entry import main

    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text("{}")
    (draft / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(sys, "argv", ["harness", "soak", *(a.format(draft=draft) for a in args)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err, err
    assert not (tmp_path / "results").exists()


def test_a_window_others_loaded_is_flagged_busy_and_left_out_of_the_latency_trend():
    """A window during which processes outside the harness used over 10 % of the CPUs: its TPOT and
    speedup are not the servers' own (seen: 0.55x with a test run beside a soak, AL unchanged)."""
    windows = _windows([3.0] * 6)
    windows[2] = replace(windows[2], foreign_cpu=0.45, tpot_ms_p50=60.0, speedup=0.6)
    windows[3] = replace(windows[3], foreign_cpu=0.02)
    assert windows[2].busy and not windows[3].busy and not windows[0].busy  # None: no /proc reading
    out = io.StringIO()
    render_soak(__import__("pathlib").Path("soak"), windows, Console(file=out, width=250))
    text = out.getvalue()
    assert "MACHINE BUSY in window(s) 3:" in text and "45% BUSY" in text
    assert "no TPOT p50 (ms) drift" in text  # window 3's 60 ms left out: the others are flat
    assert soak_exit(windows) == 0  # AL: no drift
