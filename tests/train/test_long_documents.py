"""Long-document training prompts (issue 26 item 2, harness/train/long_documents.py): lengths in the
verifier's own tokens spread evenly up to the response stage's budget, never over it, never a bench
prompt, the same every time."""

from __future__ import annotations

from harness.prompts import PromptRecord, render
from harness.suites import load_suite
from harness.train.long_documents import MARGIN, MIN_TOKENS, long_document_prompts, target_lengths
from harness.train.prompts import check_bench_overlap


def test_target_lengths_spread_evenly_from_the_floor_to_the_budget():
    assert target_lengths(5, 1000) == [128, 346, 564, 782, 1000]
    assert target_lengths(1, 900) == [900] and target_lengths(0, 900) == []
    assert target_lengths(3, 100) == [100, 100, 100]  # a budget under the floor: every prompt at it


def test_prompts_fill_the_budget_in_the_verifiers_tokens_and_are_deterministic(kimi_tokenizer):
    budget = 1536 - 96  # engine.max_model_len - train.max_new_tokens
    for kwargs in ((), (("thinking", False),)):
        recs = long_document_prompts(kimi_tokenizer, 8, budget, seed=0, template_kwargs=kwargs)
        lens = [
            len(render(kimi_tokenizer, PromptRecord(r.id, messages=r.messages, template_kwargs=kwargs))) for r in recs
        ]
        assert all(n <= budget for n in lens), lens
        assert lens == sorted(lens) and lens[0] <= MIN_TOKENS + 8 and lens[-1] >= budget - MARGIN - 16, lens
        assert len({r.id for r in recs}) == 8 and all(r.id.startswith("long-") for r in recs)
        text = recs[-1].messages[0]["content"]
        assert text.endswith(("sentences.", "points of the passage above.")) or "passage above" in text.splitlines()[-1]
    again = long_document_prompts(kimi_tokenizer, 8, budget, seed=0)
    assert [r.messages for r in again] == [r.messages for r in long_document_prompts(kimi_tokenizer, 8, budget, seed=0)]
    assert [r.messages for r in long_document_prompts(kimi_tokenizer, 8, budget, seed=1)] != [r.messages for r in again]


def test_long_documents_are_not_bench_prompts(kimi_tokenizer):
    recs = long_document_prompts(kimi_tokenizer, 16, 1440)
    bench = {s: list(load_suite(s).records) for s in ("chat", "code", "math", "summarization", "qa_long")}
    assert check_bench_overlap(recs, bench) == []


def test_the_dry_run_plans_the_long_documents_prompts_and_tokens(tmp_path):
    """train/tiny-kimi-long.toml: 512 built-in prompts + 128 long documents, whose planned tokens are
    their exact lengths (spread up to max_model_len - max_new_tokens) plus their responses."""
    from harness.paths import REPO_ROOT
    from harness.plan.dry_run import dry_run_plan
    from harness.recipe import load_recipe

    recipe = load_recipe(
        REPO_ROOT / "train" / "tiny-kimi-long.toml", ["train.conversations=0"]
    )  # tests/train/test_conversations.py
    plan = dry_run_plan(recipe, tmp_path / "run", include_bench=False)
    assert plan["responses"]["num_prompts"] == 512 + 128
    long_tokens = sum(target_lengths(128, 2048 - 96)) + 128 * 96
    assert plan["hidden_states"]["estimated_tokens"] == 512 * (96 + 256) + long_tokens
    short = dry_run_plan(
        load_recipe(REPO_ROOT / "train" / "tiny-kimi-long.toml", ["train.long_documents=0", "train.conversations=0"]),
        tmp_path / "r2",
        include_bench=False,
    )
    assert short["responses"]["num_prompts"] == 512
