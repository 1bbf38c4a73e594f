"""Prompt files (harness/prompts.py): every format, a field map, and one clear error (file:line) for
bad input. Suites: tests/test_suites.py; training prompts against the suites: tests/train/test_prompts.py."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.prompts import load_jsonl
from harness.suites import load_suite
from tests.fault_helpers import one_line, run_cli


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


def test_render_past_the_tokenizers_max_length_does_not_warn(kimi_tokenizer):
    """The harness measures rendered prompts against engine.max_model_len itself; transformers'
    "Token indices sequence length is longer than the specified maximum" line leaked into the main
    job's output (issue 51)."""
    import copy
    import logging

    from harness.prompts import PromptRecord, render

    tok = copy.deepcopy(kimi_tokenizer)
    tok.model_max_length = 8
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: seen.append(r.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("transformers.tokenization_utils_base")
    logger.addHandler(handler)
    try:
        long = "exceptions propagate through nested calls " * 10
        assert len(render(tok, PromptRecord(id="raw", prompt=long))) > 8
        assert len(render(tok, PromptRecord(id="chat", messages=({"role": "user", "content": long},)))) > 8
        assert not [m for m in seen if "longer than the specified maximum" in m]
        tok.encode(long)  # the check can fail: plain encode still warns
        assert [m for m in seen if "longer than the specified maximum" in m]
    finally:
        logger.removeHandler(handler)
