"""Prompt files and suites: every format, and one clear error (file:line) for bad input."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.prompts import load_jsonl
from harness.suites import known_suites, load_suite
from harness.train.prompts import check_bench_overlap
from tests.fault_helpers import one_line, run_cli


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
    f.write_text(
        '{"id": "a", "prompt": "raw text"}\n'
        '{"id": "b", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}\n'
        '\n{"id": "c", "turns": ["one", "two"]}\n'
    )
    recs = load_jsonl(f)
    assert [r.id for r in recs] == ["a", "b", "c"] and recs[2].num_turns == 2
    assert load_suite(str(f)).name == "mine"


@pytest.mark.parametrize(
    "line,msg",
    [
        ("{not json", "mine.jsonl:2: not valid JSON"),
        ('{"id": "x"}', "mine.jsonl:2: needs exactly one of 'prompt', 'messages' or 'turns'"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "mine.jsonl:2: messages\\[0\\] needs a role"),
        (
            '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}',
            "last message must be the user's",
        ),
        ('{"turns": []}', "'turns' must be a non-empty list"),
        ('{"id": "a", "prompt": "dup"}', "duplicate id 'a'"),
    ],
)
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


def test_thinking_is_a_matrix_dimension_rendered_through_the_chat_template(tmp_path):
    """bench.thinking = [true, false]: each suite twice, its chats rendered with the template
    variable `thinking` the way Kimi-K2.5's template takes it (on: the prompt opens <think>;
    off: it closes an empty span); raw prompts are sent as they are; the plain suite keeps its hash."""
    from harness.prompts import PromptRecord, render
    from harness.suites import Suite, _sha_of, with_thinking
    from harness.verifier.standins.tokenizer import train_tokenizer

    tok = train_tokenizer(["rivers carry water to the sea"] * 20, 300, tmp_path, thinking=True)
    recs = (PromptRecord("c", messages=({"role": "user", "content": "rivers?"},)), PromptRecord("r", prompt="rivers"))
    plain = Suite("chat", "1", _sha_of(list(recs)), "test", recs)
    assert with_thinking([plain], []) == [plain]
    on, off = with_thinking([plain], [True, False])
    assert (on.name, off.name) == ("chat@think", "chat@nothink")
    assert len({plain.sha, on.sha, off.sha}) == 3
    think_open, think_close = tok.convert_tokens_to_ids("<think>"), tok.convert_tokens_to_ids("</think>")
    assert render(tok, on.records[0])[-1] == think_open
    assert render(tok, off.records[0])[-2:] == [think_open, think_close]
    assert render(tok, plain.records[0])[-1] == think_open  # K2.5: thinking is on by default
    assert render(tok, on.records[1]) == render(tok, off.records[1]) == render(tok, recs[1])


def test_recipe_takes_thinking_for_bench_and_training():
    from harness.bench.planning import recipe_suites
    from harness.recipe import load_recipe

    r = load_recipe(
        None, ["bench.suites=['chat']", "bench.num_prompts=2", "bench.thinking=[true, false]", "train.thinking=false"]
    )
    assert [s.name for s in recipe_suites(r)] == ["chat@think", "chat@nothink"]
    assert r.train.thinking is False


def test_a_field_map_that_names_the_prompt_field_reads_ultrachat_rows(tmp_path):
    """UltraChat rows carry `prompt` and `messages`; the Kimi-K2.5 recipe's {"prompt": "prompt"}
    says which to read (before, every row was refused as ambiguous, on the hub path too)."""
    import json

    from harness.prompts import apply_field_map, load_jsonl

    row = {"prompt": "Hi there", "prompt_id": "x", "messages": [{"role": "user", "content": "Hi there"}]}
    path = tmp_path / "ultra.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert load_jsonl(path, {"prompt": "prompt"})[0].prompt == "Hi there"
    assert apply_field_map(row, {"question": "prompt"}) == row  # a map naming no field of the row changes nothing
    with pytest.raises(BadInput, match="needs exactly one of 'prompt', 'messages' or 'turns'"):
        load_jsonl(path)  # no map: still ambiguous, and said so


def test_prompt_files_that_are_not_utf8_or_not_json_are_bad_input_with_file_and_line(tmp_path, capsys, monkeypatch):
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"id":"a","prompt":"ok"}\n{"id":"u","prompt":"caf\xe9"}\n')
    code, err = run_cli(capsys, monkeypatch, "train", "--dry-run", "--set", f"train.prompts='{latin1}'")
    assert code == 2 and f"{latin1}:2: not UTF-8" in one_line(err)
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text('{"id":"a","prompt":"ok"}\n{"id": "b" "prompt": 1}\n')
    code, err = run_cli(capsys, monkeypatch, "train", "--dry-run", "--set", f"train.prompts='{malformed}'")
    assert code == 2 and f"{malformed}:2: not valid JSON" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "train-and-bench", "--dry-run", "--set", f"bench.suites=['{latin1}']")
    assert code == 2 and f"{latin1}:2: not UTF-8" in one_line(err)
