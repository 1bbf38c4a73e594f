"""Training prompts never overlap the bench's suites (harness/train/prompts.py): the built-in ones don't,
and an overlap is found."""

from __future__ import annotations

from harness.suites import known_suites, load_suite
from harness.train.prompts import check_bench_overlap


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
