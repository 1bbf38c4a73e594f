"""Content validity (harness/analysis/content.py): a cell measured past the model's end of text, or
on outputs a length limit cut far below max_tokens, says so in its flags (issue 27 item 5)."""

from __future__ import annotations

from dataclasses import replace

from harness.analysis import content
from harness.bench.rows import cell_rows
from tests.test_bench_breakdown import IDENT, _arms


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
