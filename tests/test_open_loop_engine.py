"""Open-loop load on the real server (issue 27): a request-rate sweep of the session's trained
draft and its baseline, on one seeded arrival schedule per rate; per-arm latency percentiles,
realised rates, the saturation point, goodput under the recipe's SLO, the report's table and plot,
the SLO-rate ratio from the run's own per-request timings, and the gate holding it."""

from __future__ import annotations

import json
import sys

import pytest

from harness.analysis import slo
from harness.analysis.load import ABOVE, CROSSES
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow

# the lowest rate keeps below the cap of 4 in flight (a request every 0.5 s, each well under 2 s);
# the top one sends all 12 at once: 8 wait for a slot, so the arm cannot keep up
RATES = (2.0, 64.0)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, kimi_trained_run):
    from harness.bench.run import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.recipe import load_recipe
    from harness.ui import Reporter

    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "bench.suites=['chat']",
            "bench.num_prompts=12",
            "bench.max_tokens=32",
            "bench.k=[3]",
            "bench.concurrency=[4]",
            "bench.temperature=[0.0]",
            f"bench.request_rate={list(RATES)}",
            "bench.slo={e2e_ms=600000}",  # generous: every request meets it (the tight ones below, post hoc)
            "bench.engine='server'",
            "bench.machine_sentinel=false",
            "bench.reference_drafts=[]",
            "bench.warmup_requests=2",
        ],
    )
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, kimi_trained_run.draft_dir)
    run_dir = run_bench(recipe, drafts, tmp_path_factory.mktemp("open-loop") / "run", Reporter())
    return run_dir


def _rows(run_dir):
    from harness.results.runs import read_run

    return read_run(run_dir)


def test_each_rate_is_a_cell_whose_arms_ran_on_the_same_arrival_schedule(sweep):
    run = _rows(sweep)
    spec = sorted((r for r in run.rows if r.is_speculative), key=lambda r: r.request_rate)
    assert [r.request_rate for r in spec] == list(RATES) and all(r.ok for r in run.rows), [r.error for r in run.rows]
    assert len({r.cell_id for r in spec}) == len(RATES)
    sides = json.loads((sweep / "cells" / "requests" / f"{spec[0].cell_id}.json").read_text())
    sent = {arm: {r["request_id"]: r["sent_s"] for r in sides[arm]} for arm in ("baseline", "speculative")}
    assert sent["baseline"] == sent["speculative"]  # one seeded schedule for both arms
    span = max(sent["baseline"].values())
    assert 0.5 * 12 / RATES[0] < span <= 12 / RATES[0]  # vLLM spreads 12 requests over 12 / rate s
    # vLLM's client never sends a request before its arrival; at the top rate all 12 first turns
    # arrive at once and 4 get a slot: the other 8 wait (counted in their TTFT and latency)
    burst = json.loads((sweep / "cells" / "requests" / f"{spec[-1].cell_id}.json").read_text())
    for arm in ("baseline", "speculative"):
        assert all(r["queue_s"] >= 0 for r in sides[arm] + burst[arm])
        first_turn = sorted(r["queue_s"] for r in burst[arm] if r["request_id"].endswith("#0"))
        print(f"{arm} at {RATES[-1]}/s: waits for a slot {[round(w, 2) for w in first_turn]}")
        assert len(first_turn) == 12 and all(w > 0.01 for w in first_turn[4:]), first_turn


def test_the_multi_turn_suite_reports_al_per_turn(sweep):
    """The built-in chat suite is 2-3 turns, each later turn carrying the verifier's own answers
    (sent as a round of its own, on the same arrival schedule): AL per turn with a CI."""
    run = _rows(sweep)
    for r in (r for r in run.rows if r.is_speculative):
        per_turn = r.breakdown("turn")
        print(r.cell_id, [(name, round(al, 2), n) for name, al, _, _, n in per_turn])
        assert [b[0] for b in per_turn][:2] == ["turn 1", "turn 2"], r.turns
        assert all(1.0 <= b[1] <= r.k + 1 and b[4] > 0 for b in per_turn)
        # every verify step in exactly one turn: the same steps the output-position split counts
        assert sum(b[4] for b in per_turn) == sum(r.drafts_by_output_position)


def test_each_arm_has_latency_percentiles_realised_rates_goodput_and_saturates_at_the_top_rate(sweep):
    from harness.results.slo_view import rate_lines

    run = _rows(sweep)
    for r in run.rows:
        for name in ("ttft", "tpot", "e2e"):
            p50 = r.e2e_ms_median if name == "e2e" else getattr(r, f"{name}_ms_median")
            p90, p99 = getattr(r, f"{name}_ms_p90"), getattr(r, f"{name}_ms_p99")
            assert p50 is not None and p50 <= p90 <= p99, (r.cell_id, r.mode, name, p50, p90, p99)
        assert r.arrival_rate and r.achieved_rate and r.goodput is not None
        assert r.slo_attainment == 1.0  # the recipe's SLO is generous
        assert r.goodput <= r.num_requests / r.wall_s + 1e-9
    (line,) = rate_lines(run)
    print(
        "saturation: baseline",
        line.saturation_baseline,
        "speculative",
        line.saturation_speculative,
        "| achieved/s:",
        [(r.request_rate, round(r.arrival_rate, 2), round(r.achieved_rate, 2)) for r in line.speculative],
    )
    # 12 requests arriving within 0.2 s, 4 in flight at a time: both arms saturate by the top rate
    assert line.saturation_baseline is not None and line.saturation_speculative is not None
    assert line.slo is not None and line.slo.ratio == pytest.approx(1.0)  # both meet it at every rate


def test_a_tight_slo_on_the_runs_timings_gives_each_arm_an_slo_rate_with_a_ci(sweep):
    """The SLO-rate math on the run's own per-request timings: an e2e bound just above the
    baseline's p99 at the lowest rate, so the baseline meets it there and crosses it, or not, higher
    up; either way both arms get a position on the grid, a CI around it and a ratio."""
    from harness.results.slo_view import _timings

    run = _rows(sweep)
    spec = sorted((r for r in run.rows if r.is_speculative), key=lambda r: r.request_rate)
    base = {r.cell_id: r for r in run.rows if not r.is_speculative}
    bt = [_timings(sweep, base[r.cell_id], "baseline") for r in spec]
    st = [_timings(sweep, r, "speculative") for r in spec]
    bounds = {"e2e": base[spec[0].cell_id].e2e_ms_p99 * 1.001 / 1000}
    cmp = slo.compare_slo_rates(RATES, bt, st, bounds, num_resamples=500)
    print(f"e2e SLO {bounds['e2e'] * 1000:.0f} ms: baseline {cmp.baseline}, speculative {cmp.speculative}")
    assert cmp.baseline.scores[0] <= 1.0 and cmp.baseline.point.where in (CROSSES, ABOVE)
    b = slo.position(cmp.baseline.point, max(RATES))
    assert RATES[0] <= b <= RATES[-1] and cmp.baseline.low <= cmp.baseline.high
    assert cmp.ratio == pytest.approx(slo.position(cmp.speculative.point, max(RATES)) / b)
    assert cmp.ratio_low is not None and cmp.ratio_low <= cmp.ratio


def test_the_report_shows_the_sweep_and_the_gate_holds_the_slo_rate_ratio(sweep, tmp_path, capsys, monkeypatch):
    from harness.cli import main

    def cli(*args: str) -> tuple[int, str]:  # in this process, through the real entry point
        monkeypatch.setattr(sys, "argv", ["harness", *args])
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out = capsys.readouterr()
        return code, out.out + out.err

    code, out = cli("report", str(sweep))
    assert code == 0, out[-2000:]
    md = (sweep / "report" / "report.md").read_text()
    assert "Open-loop load" in md and "SLO rate ratio" in md and "saturation" in md
    assert (sweep / "report" / "rate_sweep_1.png").stat().st_size > 10_000
    base = str(tmp_path / "b")
    assert cli("gate", str(sweep), "--baseline", base, "--update-baseline")[0] == 0
    ok = cli("gate", str(sweep), "--baseline", base, "--min-slo-rate-ratio", "0.01")
    bad = cli("gate", str(sweep), "--baseline", base, "--min-slo-rate-ratio", "1000")
    assert ok[0] == 0, ok[1][-2000:]
    assert bad[0] == 1 and "SLO rate ratio" in bad[1], bad[1][-2000:]
