"""Prompt files and suites: every format, and one clear error (file:line) for bad input."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.prompts import load_jsonl
from harness.suites import known_suites, load_suite
from harness.train.prompts import check_bench_overlap


def test_builtin_suites_are_versioned_and_large_enough():
    names = known_suites()
    assert {"chat", "code", "math", "summarization", "translation", "qa_long"} <= set(names)
    for n in names:
        s = load_suite(n)
        assert len(s.records) >= 30 and s.version and len(s.sha) == 12


def test_humaneval_from_package():
    s = load_suite("humaneval")
    assert len(s.records) == 164 and "def " in s.records[0].prompt


def test_user_file_formats(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"id": "a", "prompt": "raw text"}\n'
                 '{"id": "b", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}\n'
                 '\n{"id": "c", "turns": ["one", "two"]}\n')
    recs = load_jsonl(f)
    assert [r.id for r in recs] == ["a", "b", "c"] and recs[2].num_turns == 2
    assert load_suite(str(f)).name == "mine"


@pytest.mark.parametrize("line,msg", [
    ("{not json", "mine.jsonl:2: not valid JSON"),
    ('{"id": "x"}', "mine.jsonl:2: needs exactly one of 'prompt', 'messages' or 'turns'"),
    ('{"messages": [{"role": "robot", "content": "x"}]}', "mine.jsonl:2: messages\\[0\\] needs a role"),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}', "last message must be the user's"),
    ('{"turns": []}', "'turns' must be a non-empty list"),
    ('{"id": "a", "prompt": "dup"}', "duplicate id 'a'"),
])
def test_bad_line_names_file_and_line(tmp_path, line, msg):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"id": "a", "prompt": "fine"}\n' + line + "\n")
    with pytest.raises(BadInput, match=msg):
        load_jsonl(f)


def test_empty_suite_and_unknown_suite(tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_text("\n\n")
    with pytest.raises(BadInput, match="no prompts"):
        load_suite(str(f))
    with pytest.raises(BadInput, match="unknown suite 'nope'; known: chat, code, math"):
        load_suite("nope")


def test_builtin_training_prompts_never_overlap_bench_suites():
    from harness.recipe import load_recipe
    from harness.train.prompts import load_training_prompts

    train = load_training_prompts(load_recipe(None, ["train.num_prompts=3000"]))
    bench = {n: list(load_suite(n).records) for n in known_suites()}
    assert len(train) >= 2000
    assert check_bench_overlap(train, bench) == []


def test_overlap_is_detected(tmp_path):
    from harness.prompts import PromptRecord

    bench = {"code": list(load_suite("code").records)}
    leaked = PromptRecord("t1", prompt="Please solve: " + bench["code"][0].user_texts()[0])
    assert check_bench_overlap([leaked], bench) == ["t1 ~ code/" + bench["code"][0].id]
