"""Content validity (harness/analysis/content.py): a cell measured past the model's end of text, or
on outputs a length limit cut far below max_tokens, says so in its flags (issue 27 item 5)."""

from __future__ import annotations

from dataclasses import replace

from harness.analysis import content
from harness.bench.rows import cell_rows
from tests.bench.test_breakdown import IDENT, _arms


def test_ignore_eos_is_flagged_and_the_default_is_not():
    assert content.ignore_eos_flag(False) is None
    assert content.ignore_eos_flag(True).startswith("IGNORE EOS: ")


def test_a_length_stop_far_below_max_tokens_is_cut_short():
    # max_tokens 64: 12 tokens on a length limit is the context, 64 is max_tokens itself, "stop" is EOS
    finishes = [("length", 12), ("length", 20), ("length", 64), ("stop", 5), (None, 3)]
    flag = content.cut_short_flag(finishes, 64)
    assert flag.startswith("CUT SHORT: 2 of 5 requests") and "median of 16 of max_tokens=64" in flag
    assert content.cut_short_flag([("length", 64), ("stop", 3), ("length", 40)], 64) is None  # 40 >= 64 / 2


def _finished(arm, reason: str, tokens: int | None = None):
    arm.requests = [
        replace(r, finish_reason=reason, output_token_ids=r.output_token_ids[:tokens] if tokens else r.output_token_ids)
        for r in arm.requests
    ]


def test_a_cell_carries_the_flags_through_cell_rows():
    """IDENT's max_tokens is 64; the synthetic requests return 12 tokens."""
    base, spec = _arms()
    for arm in (base, spec):
        _finished(arm, "stop")
    _, rs = cell_rows(IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    assert not [f for f in rs.flags if f.startswith(("IGNORE EOS", "CUT SHORT"))]
    _, rs = cell_rows(
        IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1, ignore_eos=True
    )
    assert [f for f in rs.flags if f.startswith("IGNORE EOS")]
    _finished(spec, "length")  # 12 of 64 tokens on a length limit: the context cut them
    _, rs = cell_rows(IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1)
    assert [f for f in rs.flags if f.startswith("CUT SHORT: 4 of 4 requests")], rs.flags


# ----------------------------------------------------------------------------- random-token prompts


def _random_texts(tokenizer, n: int, length: int, seed: int = 0) -> list[str]:
    """What vLLM's random dataset sends: ids drawn uniformly from the vocabulary, decoded to text."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [tokenizer.decode(rng.integers(0, len(tokenizer), length).tolist()) for _ in range(n)]


def test_uniform_ids_look_random_and_the_built_in_suites_do_not(kimi_tokenizer):
    """The built-in suites rendered by the Kimi stand-in's tokenizer (29-1,509 tokens): none looks
    random; uniform ids of 32-1,024 tokens and vLLM-style decoded random text (encoded again) do."""
    import numpy as np

    from harness.prompts import render
    from harness.suites import load_suites

    vocab = len(kimi_tokenizer)
    for suite in load_suites(["chat", "code", "math", "summarization", "qa_long", "translation"]):
        ids = [render(kimi_tokenizer, r) for r in suite.records]
        assert content.random_prompts(ids, vocab)[0] == 0, suite.name
        assert content.random_suite(ids, vocab) is None
    rng = np.random.default_rng(1)
    for n in (32, 256, 1024):
        hits, checked = content.random_prompts([rng.integers(0, vocab, n).tolist() for _ in range(20)], vocab)
        assert checked == 20 and hits >= 19, (n, hits)
    texts = _random_texts(kimi_tokenizer, 20, 128)
    encoded = [kimi_tokenizer.encode(t, add_special_tokens=False) for t in texts]
    assert content.random_suite(encoded, vocab).startswith("RANDOM PROMPTS: ")
    assert content.random_prompts([list(range(10))], vocab) == (0, 0)  # too short to tell


def test_a_random_token_suite_is_refused_unless_asked_for_and_then_flagged(tmp_path, kimi_standin, kimi_tokenizer):
    """A prompt file of vLLM-style random text: the main job's and the bench's prompt check refuses
    it in one line naming the suite and the setting; with bench.allow_random_prompts it renders, and
    its cells carry RANDOM PROMPTS."""
    import pytest

    from harness.bench.planning import check_prompts_fit, random_suite_flag, recipe_suites, render_requests
    from harness.errors import BadInput
    from harness.recipe import load_recipe
    from harness.verifier.layout import resolve_layout
    from tests.conftest import PLAIN_RECIPE
    from tests.test_benchfiles import write_jsonl

    path = write_jsonl(tmp_path / "random.jsonl", [{"prompt": t} for t in _random_texts(kimi_tokenizer, 8, 96)])
    sets = ["verifier.standin='kimi-k2.5'", f"bench.suites=['{path}']", "bench.max_tokens=32"]
    layout = resolve_layout(kimi_standin)
    with pytest.raises(BadInput, match=r"suite random: \d of 8 prompts look like token ids drawn at random") as e:
        check_prompts_fit(load_recipe(PLAIN_RECIPE, sets), layout)
    assert "bench.allow_random_prompts = true" in str(e.value) and "\n" not in str(e.value)
    allowed = load_recipe(PLAIN_RECIPE, [*sets, "bench.allow_random_prompts=true"])
    check_prompts_fit(allowed, layout)
    (suite,) = recipe_suites(allowed)
    flag = random_suite_flag(kimi_tokenizer, render_requests(kimi_tokenizer, suite, 480, allow_random=True))
    base, spec = _arms()
    _, rs = cell_rows(
        IDENT, base, spec, predicted_al=None, deterministic_verifier=False, mismatch_tolerance=0.1, random_prompts=flag
    )
    assert [f for f in rs.flags if f.startswith("RANDOM PROMPTS: ")], rs.flags
