"""Repetition measure, context flag and AL-gap explanation (harness/analysis/repetition.py)."""

from __future__ import annotations

import pytest

from harness.analysis import repetition as rep
from harness.errors import BadInput

LOOP = list(range(100, 110)) + [20, 21, 22, 23, 24] * 10  # 10 fresh tokens, then a period-5 loop x10


def test_a_loop_marks_everything_after_its_first_period():
    # the 8-gram ending at i repeats the one ending at i-5 from i = 22 on, and marks i-7..i: tokens 15..59
    assert rep.repeated_tokens(LOOP) == 45
    assert rep.repetition_share(LOOP) == pytest.approx(45 / 60)


def test_healthy_output_reads_zero():
    assert rep.repeated_tokens(list(range(300))) == 0
    phrase = [7, 8, 9, 10, 11]  # a 5-token phrase recurring is shorter than n = 8: not a loop
    assert rep.repeated_tokens(list(range(50)) + phrase + list(range(200, 230)) + phrase) == 0
    assert rep.repetition_share([]) == 0.0


def test_a_copy_beyond_the_window_is_not_a_loop():
    block = list(range(500, 520))
    far = block + list(range(1000, 1000 + 1100)) + block
    assert rep.repeated_tokens(far) == 0
    assert rep.repeated_tokens(far, window=2000) == 20


def test_cell_pools_tokens_and_flags_a_looping_cell():
    healthy = list(range(60))
    cell = rep.cell_repetition([LOOP, healthy, healthy])
    assert (cell.repeated, cell.total, cell.looping_requests, cell.num_requests) == (45, 180, 1, 3)
    assert cell.share == pytest.approx(0.25)
    assert rep.looping_flag(cell) is None  # 25 % < 30 %
    looping = rep.cell_repetition([LOOP, LOOP, healthy])
    assert looping.share == pytest.approx(0.5)
    assert rep.looping_flag(looping) == (
        "LOOPING OUTPUTS (50% of output tokens repeat an 8-gram from the previous 1024 tokens; 2 of 3 requests loop)"
    )


def test_context_flag_names_the_lengths():
    assert (
        rep.context_flag([1300, 1250, 400, 380], 512)
        == "BEYOND TRAINING CONTEXT (prompts up to 1300 tokens; draft trained on <= 512)"
    )
    assert rep.context_flag([1300, 400, 380, 390, 300], 512) is None  # 1 of 5 < a quarter
    assert rep.context_flag([100, 200], 512) is None
    assert rep.context_flag([1300], None) is None


def test_explanation_precedence():
    tol = 0.10
    # issue 13's RAG cell: AL 2.03 vs predicted 3.22, prompts past the training context
    gap = (2.03 - 3.22) / 3.22
    assert rep.explain_al_gap(gap, tol, beyond_context=True, looping=False) == rep.BEYOND_CONTEXT
    assert (
        rep.explain_al_gap(gap, tol, beyond_context=True, looping=True) == rep.BEYOND_CONTEXT
    )  # loops cannot lower AL
    assert rep.explain_al_gap(gap, tol, beyond_context=False, looping=True) == rep.MISMATCH
    assert rep.explain_al_gap(+0.2, tol, beyond_context=False, looping=True) == rep.LOOPING
    assert rep.explain_al_gap(+0.2, tol, beyond_context=True, looping=False) == rep.MISMATCH  # context cannot raise AL
    assert rep.explain_al_gap(0.05, tol, beyond_context=True, looping=True) is None
    assert rep.explain_al_gap(None, tol, beyond_context=True, looping=True) is None


def test_bad_parameters_are_refused():
    with pytest.raises(BadInput):
        rep.repeated_tokens([1, 2, 3], n=0)
