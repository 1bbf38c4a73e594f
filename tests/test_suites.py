"""Suites (harness/suites.py): the built-in ones and humaneval, unknown and empty ones refused, thinking
as a dimension of the matrix. No measurement is lost or started in vain: suites that would share a name
get names of their own (or are refused naming both specs), a run folder never overwrites another suite's cell, and a
prompt longer than the context is refused before any engine starts or any file is written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.errors import BadInput
from harness.results.table import read_cell, write_cell
from harness.suites import known_suites, load_suite, load_suites, with_thinking
from tests.test_benchfiles import MT_BENCH, SPEC_BENCH_EXTRA, write_jsonl

SPEC_BENCH_FILES = {  # four files of one released format: every one reads as dataset `spec-bench`
    "translation": [SPEC_BENCH_EXTRA],
    "math_reasoning": [{"question_id": 201, "category": "math_reasoning", "turns": ["What is 17 * 23?"]}],
    "summarization": [{"question_id": 301, "category": "summarization", "turns": ["Summarize: the cat sat."]}],
    "rag": [{"question_id": 401, "category": "rag", "turns": ["Using the passage, who sat? The cat sat."]}],
}


def test_four_same_format_files_are_four_suites(tmp_path):
    paths = [str(write_jsonl(tmp_path / f"{name}.jsonl", recs)) for name, recs in SPEC_BENCH_FILES.items()]
    suites = load_suites(paths)
    assert [s.name for s in suites] == [f"spec-bench-{n}" for n in SPEC_BENCH_FILES]
    assert len({s.sha for s in suites}) == 4
    # a name that was unique stays as it was
    assert [s.name for s in load_suites([paths[0], "chat"])] == ["spec-bench", "chat"]


def test_a_suite_listed_twice_is_refused_naming_both(tmp_path):
    path = str(write_jsonl(tmp_path / "question.jsonl", MT_BENCH))
    other = str(write_jsonl(tmp_path / "other" / "question.jsonl", MT_BENCH[:1]))
    with pytest.raises(BadInput, match="both make suite 'mt-bench-question'") as e:
        load_suites([path, other])
    assert path in str(e.value) and other in str(e.value)
    with pytest.raises(BadInput, match="'chat' and 'chat' both make suite 'chat'"):
        load_suites(["chat", "chat"])


def test_run_folder_never_overwrites_another_suites_cell(tmp_path):
    from tests.results_fixtures import rows_for

    row = rows_for("r", suite="spec-bench", suite_sha="aaa")[0]
    write_cell(tmp_path, row["cell_id"], [row])
    write_cell(tmp_path, row["cell_id"], [row])  # the same suite again (a rerun): fine
    with pytest.raises(BadInput, match="refusing to overwrite"):
        write_cell(tmp_path, row["cell_id"], [{**row, "suite_sha": "bbb"}])
    assert read_cell(tmp_path / "cells" / f"{row['cell_id']}.json")[0].suite_sha == "aaa"


@pytest.mark.slow
def test_prompt_longer_than_the_context_is_refused_before_any_engine(tmp_path, kimi_standin):
    """`harness bench` with max_tokens leaving no room for the prompts: exit 2 with one line naming
    the prompt and the fix, no run folder, no engine log."""
    from harness.paths import RUNS_DIR

    run_id = f"test-too-long-{tmp_path.name}"
    args = [
        sys.executable,
        "-m",
        "harness",
        "bench",
        "--run-id",
        run_id,
        "--set",
        "bench.method='ngram'",
        "--set",
        "bench.reference_drafts=[]",
        "--set",
        "bench.max_tokens=500",
        "--set",
        "bench.suites=['chat']",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "more than engine.max_model_len - bench.max_tokens = 12" in proc.stderr
    assert "lower bench.max_tokens" in proc.stderr
    assert not (RUNS_DIR / run_id).exists()


def test_builtin_suites_are_versioned_and_large_enough():
    names = known_suites()
    assert {"chat", "code", "math", "summarization", "translation", "qa_long"} <= set(names)
    for n in names:
        s = load_suite(n)
        assert len(s.records) >= 30 and s.version and len(s.sha) == 12


def test_chat_code_and_math_carry_a_paired_gate_and_keep_the_stored_baselines_prompts():
    """chat / code / math hold >= 80 prompts, what 80 % power at a 2.5 % tolerance takes on the demo's
    model (docs/gate.md). Their growth appended prompts: a cell over the first 8 keeps the sha every stored
    baseline was measured with, so the committed gates still compare."""
    import json
    from pathlib import Path

    for n in ("chat", "code", "math"):
        assert len(load_suite(n).records) >= 80
    stored = Path(__file__).resolve().parents[1] / "results" / "baselines"
    for folder in ("tiny-kimi", "tiny-kimi-ci"):
        for cell in json.loads((stored / folder / "baseline.json").read_text())["cells"]:
            name, _, mode = cell["suite"].partition("@")
            suite = load_suite(name, int(cell["num_prompts"]))
            (suite,) = with_thinking([suite], [mode == "think"]) if mode else (suite,)
            assert suite.sha == cell["suite_sha"], (folder, cell["suite"])


def test_humaneval_from_package():
    s = load_suite("humaneval")
    assert len(s.records) == 164 and "def " in s.records[0].prompt


def test_empty_suite_and_unknown_suite(tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_text("\n\n")
    with pytest.raises(BadInput, match="no prompts"):
        load_suite(str(f))
    with pytest.raises(BadInput, match="unknown suite 'nope'; known: chat, code, math"):
        load_suite("nope")


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
