"""Thinking vs answer on a real engine (issue 13): the Kimi-K2.5 stand-in in K2.5's thinking
format (`<think>`...`</think>` special tokens, a chat template that takes `thinking`), benched
with thinking on and off. Its outputs must close real think spans with thinking on, the cell must
split AL into a thinking and an answer segment with CIs, a suite with thinking off must have no
thinking segment, and the main job's summary must pool the segments from the per-step records.
The draft is the same-shaped random one: what is tested is where the steps fall, not how well
a draft predicts them (the trained figures are `train/tiny-kimi-thinking.toml`'s, README)."""

from __future__ import annotations

import pytest

from harness.paths import REPO_ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def thinking_run(tmp_path_factory):
    from harness.bench.cell import end_think_id
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import load_tokenizer, resolve_verifier
    from harness.recipe import load_recipe
    from harness.ui import Reporter
    from tests.results_fixtures import run_frame

    recipe = load_recipe(
        REPO_ROOT / "train" / "tiny-kimi-thinking.toml",
        [
            "bench.suites=['chat']",
            "bench.num_prompts=6",
            "bench.max_tokens=64",
            "bench.reference_drafts=['random']",
            "bench.warmup_requests=1",
            "bench.machine_sentinel=false",  # acceptance per segment only: no speed is asserted here
        ],
    )
    layout = resolve_verifier(recipe)  # builds the thinking stand-in once (cached like the others)
    run_dir = run_bench(
        recipe, resolve_drafts(recipe, layout, None), tmp_path_factory.mktemp("think") / "run", Reporter()
    )
    _, df, missing = run_frame(run_dir)
    assert not missing
    return run_dir, df, end_think_id(load_tokenizer(layout))


def test_thinking_on_splits_al_at_real_think_spans(thinking_run):
    from harness.results.table import load_cell_requests

    run_dir, df, end_think = thinking_run
    assert end_think is not None  # `</think>` is one special token, as in K2.5's tokenizer
    spec = df[df["mode"] == "speculative"].set_index("suite")
    on = spec.loc["chat@think"]
    requests = load_cell_requests(run_dir, on["cell_id"])["speculative"]
    closed = [r for r in requests if end_think in r["output_token_ids"]]
    assert len(closed) >= len(requests) - 1, f"{len(closed)} of {len(requests)} outputs closed the think span"
    assert list(on["segments"]) == ["thinking", "answer"]
    for al, lo, hi, n in zip(
        on["al_by_segment"],
        on["al_by_segment_ci_low"],
        on["al_by_segment_ci_high"],
        on["drafts_by_segment"],
        strict=True,
    ):
        assert n > 0 and lo <= al <= hi, (al, lo, hi, n)
    # the segments partition the cell's steps: their drafts add up to the cell's
    assert sum(on["drafts_by_segment"]) == on["num_drafts"]


def test_the_default_stand_in_does_not_loop_with_thinking_on(thinking_run):
    """Issue 26: the embedded default's verifier (this stand-in, thinking on) writes without loops:
    at most 25 % of its greedy output tokens repeat an 8-gram of their context (the plain 150-step
    stand-in: 58-76 %), so no cell carries LOOPING OUTPUTS."""
    from harness.analysis.repetition import LOOPING

    _, df, _ = thinking_run
    on = df[(df["mode"] == "speculative") & (df["suite"] == "chat@think")].iloc[0]
    print(f"chat@think: {on['repetition_share']:.1%} of output tokens repeat an 8-gram")
    assert on["repetition_share"] <= 0.25
    assert not any(f.startswith(LOOPING) for f in on["flags"]), on["flags"]


def test_thinking_off_has_no_thinking_segment(thinking_run):
    run_dir, df, _ = thinking_run
    off = df[(df["mode"] == "speculative") & (df["suite"] == "chat@nothink")].iloc[0]
    segs = dict(zip(off["segments"], off["drafts_by_segment"], strict=True)) if len(off["segments"]) else {}
    assert segs.get("thinking", 0) == 0, segs


def test_main_job_summary_pools_segments_with_cis(thinking_run):
    from harness.main_job import _summary_rows
    from harness.results.runs import read_run

    run_dir, _, end_think = thinking_run
    rows = {r["suite"]: r for r in _summary_rows(read_run(run_dir), None, end_think)}
    on = rows["chat@think"]["al_by_segment"]
    assert set(on) == {"thinking", "answer"}
    for al, lo, hi in on.values():
        assert lo <= al <= hi
    assert "thinking" not in rows["chat@nothink"]["al_by_segment"]
