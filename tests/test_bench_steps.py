"""vLLM's per-step record (per_request_spec_decode_metrics="detailed") against its own counters, on
real vLLM-CPU with the Kimi-K2.5 stand-in: summed over the steps of every request of a cell, the
per-step arrays in the cell's side file equal the cell's pooled counters exactly (drafts, draft
tokens, accepted tokens, accepted per position), in the offline engine and the server."""

from __future__ import annotations

import pytest

from harness.analysis import steps
from harness.bench.run import run_bench
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.recipe import load_recipe
from harness.results.table import load_cell_requests, load_run
from harness.ui import Reporter

pytestmark = pytest.mark.slow

TINY = ["bench.suites=['code']", "bench.num_prompts=3", "bench.max_tokens=24", "bench.k=[3]",
        "bench.concurrency=[2]", "bench.temperature=[0.0]", "bench.repeats=2", "bench.warmup_requests=1",
        "bench.reference_drafts=['ngram']"]  # one drafter that accepts: per-position sums are non-trivial


def assert_steps_sum_to_counters(run_dir, df, requests_per_cell: dict[str, int], repeats: int) -> None:
    """Every speculative cell's per-request per-step arrays, summed, equal its pooled counters."""
    spec = df[df["mode"] == "speculative"]
    assert len(spec) and spec["num_accepted_tokens"].sum() > 0
    for _, row in spec.iterrows():
        records = load_cell_requests(run_dir, row["cell_id"])["speculative"]
        assert len(records) == repeats * requests_per_cell[row["suite"]] and all(r["steps"] for r in records)
        reqs = [steps.RequestSteps(tuple(r["accepted"]), tuple(r["drafted"]), r["prompt_tokens"]) for r in records]
        pooled = steps.pooled_counters(reqs, k=int(row["k"]))
        assert pooled.num_drafts == row["num_drafts"], row["cell_id"]
        assert pooled.num_draft_tokens == row["num_draft_tokens"]
        assert pooled.num_accepted_tokens == row["num_accepted_tokens"]
        assert list(pooled.accepted_per_pos) == list(row["accepted_per_pos"])
        assert sum(row["drafts_by_output_position"]) == row["num_drafts"] == sum(row["drafts_by_prompt_length"])


def test_per_step_sums_equal_the_pooled_counters_through_the_server(tmp_path, kimi_standin):
    """The server's per-request record (`metrics.speculative_decoding`); the offline engine's is
    checked on the benchmark-file run of tests/test_benchfiles.py."""
    recipe = load_recipe(None, [*TINY, "bench.engine='server'"])
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, None)
    run_dir = run_bench(recipe, drafts, tmp_path / "run", Reporter())
    _, df, missing = load_run(run_dir)
    assert not missing
    assert_steps_sum_to_counters(run_dir, df, requests_per_cell={"code": 3}, repeats=2)
    row = df[df["mode"] == "speculative"].iloc[0]
    assert row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]
    assert 0.0 <= row["repetition_share"] <= 1.0
