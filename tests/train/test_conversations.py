"""Training conversations (issue 26, harness/train/conversations.py): which prompts become
conversations, that their follow-ups are never bench prompts, that a later turn's context is what
the bench feeds back, and that the dry run plans their requests and tokens."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.prompts import PromptRecord, render
from harness.suites import load_suite
from harness.train.conversations import FOLLOW_UPS, MAX_FOLLOW_UPS, conversation_so_far, with_follow_ups
from harness.train.prompts import check_bench_overlap


def _chat(i: int) -> PromptRecord:
    return PromptRecord(f"p{i}", messages=({"role": "user", "content": f"question {i}"},))


def test_follow_ups_continue_n_single_turn_chats_the_same_way_every_time():
    raw = PromptRecord("raw", prompt="a raw prompt")  # no chat template to hold a conversation
    system = PromptRecord("sys", messages=({"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}))
    records = [_chat(i) for i in range(10)] + [raw, system]
    out = with_follow_ups(records, 4, seed=0)
    assert [r.id for r in out] == [r.id for r in records]  # order and ids kept
    continued = [r for r in out if r.turns]
    assert len(continued) == 4
    for r in continued:
        first = records[int(r.id[1:])].messages[0]["content"]
        assert r.turns[0] == first and 2 <= len(r.turns) <= 1 + MAX_FOLLOW_UPS
        assert all(f in FOLLOW_UPS for f in r.turns[1:])
    assert out[-2] is raw and out[-1] is system
    assert [r.turns for r in with_follow_ups(records, 4, seed=0)] == [r.turns for r in out]
    assert [r.turns for r in with_follow_ups(records, 4, seed=1)] != [r.turns for r in out]
    assert with_follow_ups(records, 0) == records
    with pytest.raises(BadInput, match=r"train.conversations = 11 .* 10 single-turn"):
        with_follow_ups(records, 11)


def test_follow_ups_are_not_bench_prompts():
    suites = ("chat", "code", "math", "translation", "summarization", "qa_long")
    bench = {s: list(load_suite(s).records) for s in suites}
    records = [PromptRecord(f"f{i}", turns=("a first turn", f)) for i, f in enumerate(FOLLOW_UPS)]
    assert check_bench_overlap(records, bench) == []


def test_a_later_turn_holds_the_answers_as_the_bench_feeds_them_back(kimi_tokenizer):
    turns = ["Write a haiku about rain.", "Now make it more formal.", "Translate your answer into French."]
    answers = [kimi_tokenizer.encode("Rain taps the window", add_special_tokens=False)]
    msgs = conversation_so_far(kimi_tokenizer, turns, answers, None)  # no </think> in its vocabulary
    assert msgs == [
        {"role": "user", "content": turns[0]},
        {"role": "assistant", "content": "Rain taps the window"},
        {"role": "user", "content": turns[1]},
    ]
    answers.append(kimi_tokenizer.encode("Rainfall upon the pane", add_special_tokens=False))
    third = conversation_so_far(kimi_tokenizer, turns, answers, None)
    assert third[:3] == msgs and third[3]["content"] == "Rainfall upon the pane" and third[-1]["content"] == turns[2]
    rec = PromptRecord("c", turns=tuple(turns), template_kwargs=(("thinking", True),))
    ids = render(kimi_tokenizer, rec, third)
    text = kimi_tokenizer.decode(ids)
    assert text.index("Rain taps") < text.index("more formal") < text.index("Rainfall") < text.index("French")


def test_the_dry_run_plans_the_later_turns_requests_and_tokens(tmp_path):
    from harness.paths import REPO_ROOT
    from harness.plan.dry_run import dry_run_plan
    from harness.prompts import load_jsonl
    from harness.recipe import load_recipe
    from harness.train.prompts import BUILTIN

    path = REPO_ROOT / "train" / "tiny-kimi-long.toml"
    base = dry_run_plan(load_recipe(path, ["train.conversations=0"]), tmp_path / "a", include_bench=False)
    plan = dry_run_plan(load_recipe(path), tmp_path / "b", include_bench=False)  # its 256 conversations
    later = [len(r.turns) - 1 for r in with_follow_ups(load_jsonl(BUILTIN)[:512], 256) if r.turns]
    assert plan["responses"]["later_turns"] == sum(later) and 256 <= sum(later) <= 512
    assert plan["responses"]["num_prompts"] == base["responses"]["num_prompts"] + sum(later)
    per_turn = 96 + 256  # max_new_tokens + the plan's 256 prompt tokens per turn
    extra = sum(sum((t + 1) * per_turn for t in range(1, n + 1)) for n in later)
    assert plan["hidden_states"]["estimated_tokens"] == base["hidden_states"]["estimated_tokens"] + extra
    assert base["responses"]["later_turns"] == 0


def test_the_answer_fed_back_is_what_a_client_gets_as_content(tmp_path):
    """With thinking, only what follows </think> (the reasoning parser's `content`); an output that
    never closed its thinking, or a tokenizer without the marker, is fed back whole."""
    from harness.prompts import END_THINK, end_think_token, with_answer
    from harness.verifier.standins.tokenizer import train_tokenizer

    tok = train_tokenizer(["rivers carry water to the sea"] * 20, 300, tmp_path, thinking=True)
    end = tok.get_vocab()[END_THINK]
    assert end_think_token(tok) == end
    plan, answer = (tok.encode(t, add_special_tokens=False) for t in ("rivers carry", "water to the sea"))
    asked = [{"role": "user", "content": "q"}]
    fed = with_answer(tok, asked, [*plan, end, *answer], end)
    assert fed == [*asked, {"role": "assistant", "content": tok.decode(answer, skip_special_tokens=True)}]
    assert "rivers" not in fed[-1]["content"] and "sea" in fed[-1]["content"]
    assert with_answer(tok, asked, plan, end)[-1]["content"] == tok.decode(plan, skip_special_tokens=True)
    stray = with_answer(tok, asked, [*plan, end, *answer], None)[-1]["content"]
    assert "rivers" in stray and "sea" in stray  # thinking off: a stray </think> is part of the answer


@pytest.mark.slow
def test_the_responses_stage_answers_conversations_turn_by_turn_on_vllm(tmp_path, kimi_layout, kimi_tokenizer):
    """Real vLLM-CPU, the plain Kimi stand-in: each later turn is sent holding the verifier's own
    earlier answers as the bench feeds them back, and every answered turn is a training sample; a
    turn that would outgrow engine.max_model_len - max_new_tokens is not sent (its conversation ends)."""
    from harness.recipe import load_recipe
    from harness.train.responses import stage_prompts, stage_responses
    from harness.train.run_dir import read_jsonl
    from harness.ui import Reporter
    from tests.conftest import PLAIN_RECIPE

    recipe = load_recipe(
        PLAIN_RECIPE,
        ["verifier.standin='kimi-k2.5'", "train.num_prompts=6", "train.conversations=6", "train.max_new_tokens=16"],
    )
    rows = stage_prompts(recipe, tmp_path, kimi_layout)
    turns = {r["id"]: r["turns"] for r in rows}
    assert all(len(t) >= 2 for t in turns.values())
    samples = stage_responses(recipe, kimi_layout, tmp_path, rows, Reporter())
    answers = {r["id"]: [r["output_ids"]] for r in read_jsonl(tmp_path / "responses" / "part-00000.jsonl")}
    limit = recipe.engine.max_model_len - recipe.train.max_new_tokens
    sent = 0
    for t in (1, 2):
        got = {r["id"]: r for r in read_jsonl(tmp_path / "responses" / f"turn-{t}.jsonl")}
        for rid, conv in turns.items():
            if t >= len(conv) or len(answers.get(rid, ())) != t:
                assert f"{rid}#{t}" not in got
                continue
            msgs = conversation_so_far(kimi_tokenizer, conv, answers[rid], None)
            ids = render(kimi_tokenizer, PromptRecord(rid, turns=tuple(conv)), msgs)
            if len(ids) > limit:
                assert f"{rid}#{t}" not in got
                continue
            r = got[f"{rid}#{t}"]
            assert r["prompt_ids"] == ids and r["output_ids"]
            answers[rid].append(r["output_ids"])
            sent += 1
    assert sent >= 6  # every conversation's second turn at least (16-token answers fit the context)
    assert {s.id for s in samples} == set(turns) | {
        f"{rid}#{t}" for rid, a in answers.items() for t in range(1, len(a))
    }
