"""A DFlash draft as a user brings it (speculators' `dflash` checkpoint: a block drafter that proposes
k tokens from one forward over mask tokens) is recognised and benched through the real vLLM-CPU
engine (method "dflash") against the same baseline: counters, per-position, lossless at T = 0. The
draft here is speculators' own, randomly initialised (the harness does not train DFlash yet), so its
acceptance is ~0: this shows the path, not a draft."""

from __future__ import annotations

import pytest

from harness.bench.run import run_bench
from harness.draft.formats import inspect_draft
from harness.draft.under_test import resolve_drafts
from harness.recipe import load_recipe
from harness.results.table import load_run
from harness.ui import Reporter
from harness.verifier.layout import resolve_layout
from tests.draft_fixtures import block_drafter

pytestmark = pytest.mark.slow

BENCH = [
    "verifier.standin='llama'",
    "bench.engine='offline'",
    "bench.suites=['code']",
    "bench.num_prompts=4",
    "bench.max_tokens=24",
    "bench.k=[3]",
    "bench.concurrency=[2]",
    "bench.warmup_requests=1",
    "bench.machine_sentinel=false",  # no speed is asserted
    "bench.reference_drafts=[]",
    "engine.max_model_len=512",
]


def test_a_dflash_draft_is_recognised_and_benched_as_vllms_dflash_method(tmp_path, llama_standin):
    draft = block_drafter("dflash", llama_standin, tmp_path / "dflash")
    info = inspect_draft(draft)
    assert (info.format, info.method, info.vllm_method) == ("speculators", "dflash", "dflash")
    assert info.aux_layer_ids  # from aux_hidden_state_layer_ids, which DFlash configs use
    recipe = load_recipe(None, BENCH)
    layout = resolve_layout(llama_standin)
    drafts = resolve_drafts(recipe, layout, draft)
    assert [d.method for d in drafts] == ["dflash"]
    _, df, missing = load_run(run_bench(recipe, drafts, tmp_path / "bench", Reporter()))
    assert not missing
    spec = df[df["mode"] == "speculative"]
    assert len(spec) == 1 and (spec["status"] == "ok").all() and (spec["method"] == "dflash").all()
    row = spec.iloc[0]
    print(
        f"dflash: drafts {row['num_drafts']}, draft tokens {row['num_draft_tokens']}, "
        f"accepted {row['num_accepted_tokens']}"
    )
    assert row["num_drafts"] > 0 and row["num_draft_tokens"] == 3 * row["num_drafts"]
    assert row["lossless_compared"] >= 4 and row["lossless_verdict"] != "SPEC BUG"
