"""vLLM's per-step record (per_request_spec_decode_metrics="detailed") against its own counters:
summed over the steps of every request of a cell, the per-step arrays in the cell's side file
equal the cell's pooled counters exactly (drafts, draft tokens, accepted tokens, accepted per
position). Asserted on real vLLM-CPU runs that exist for other reasons: the offline engine's in
tests/test_benchfiles.py, the server's in tests/e2e/test_bench_failures.py (the killed and resumed run)."""

from __future__ import annotations

from harness.analysis import steps
from harness.results.table import load_cell_requests


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
