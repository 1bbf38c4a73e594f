"""No measurement is lost or started in vain: suites that would share a name get names of their
own (or are refused naming both specs), a run folder never overwrites another suite's cell, and a
prompt longer than the context is refused before any engine starts or any file is written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.errors import BadInput
from harness.results.table import read_cell, write_cell
from harness.suites import load_suites
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
