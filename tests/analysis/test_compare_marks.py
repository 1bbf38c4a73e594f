"""Compact compare with noise marks (harness/analysis/compare_marks.py)."""

from __future__ import annotations

import pytest

from harness.analysis import compare_marks as cm
from harness.errors import BadInput


def _row(suite, c, al, al_ci, sp, sp_ci, tok_s, **extra):
    return {
        "suite": suite,
        "k": 3,
        "concurrency": c,
        "temperature": 0.0,
        "acceptance_length": al,
        "al_ci_low": al_ci[0],
        "al_ci_high": al_ci[1],
        "speedup": sp,
        "speedup_ci_low": sp_ci[0],
        "speedup_ci_high": sp_ci[1],
        "output_tok_per_s": tok_s,
        **extra,
    }


DEMO = [
    _row("chat", 1, 3.38, (3.20, 3.55), 1.80, (1.70, 1.90), 52.1),
    _row("code", 1, 3.15, (2.95, 3.34), 1.72, (1.60, 1.85), 49.0),
    _row("math", 1, 3.08, (2.90, 3.25), 1.85, (1.75, 1.95), 50.3),
]
RETRAINED = [
    _row("chat", 1, 2.90, (2.75, 3.05), 1.60, (1.50, 1.68), 46.0),  # AL CIs separate, speedup too
    _row("code", 1, 3.05, (2.85, 3.25), 1.70, (1.58, 1.82), 48.2),  # overlaps: not marked
    _row("math", 1, 3.40, (3.27, 3.52), 1.85, (1.75, 1.95), 50.3),  # AL up beyond noise
    _row("rag", 1, 2.03, (1.90, 2.15), 1.10, (1.00, 1.20), 30.0),
]  # only in this run


def test_a_run_against_itself_has_zero_deltas_and_no_marks():
    cc = cm.compact([("demo", DEMO), ("demo#2", DEMO)])
    assert len(cc.rows) == 3 and cc.only_in == ()
    for r in cc.rows:
        for ds in r.deltas.values():
            (d,) = ds
            assert d.delta == 0 and d.rel == 0 and d.beyond_noise is False
    assert cc.marked == []


def test_marks_are_exactly_the_deltas_whose_cis_separate():
    cc = cm.compact([("demo", DEMO), ("retrained", RETRAINED)])
    assert cc.marked == [
        (("chat", 3, 1, 0.0), "acceptance_length", 1),
        (("chat", 3, 1, 0.0), "speedup", 1),
        (("math", 3, 1, 0.0), "acceptance_length", 1),
    ]
    assert cc.only_in == ((("rag", 3, 1, 0.0), "retrained"),)
    chat = cc.rows[0].deltas["acceptance_length"][0]
    assert chat.delta == pytest.approx(-0.48) and chat.rel == pytest.approx(-0.48 / 3.38)
    # tok/s has no CI here: its delta is shown, its mark is unknown, never a silent "no"
    assert cc.rows[0].deltas["output_tok_per_s"][0].beyond_noise is None


def test_table_has_one_row_per_cell_and_columns_per_run():
    headers, body = cm.table(cm.compact([("demo", DEMO), ("retrained", RETRAINED)]))
    assert headers == [
        "suite",
        "k",
        "concurrency",
        "temperature",
        "demo AL",
        "demo speedup",
        "demo tok/s",
        "retrained AL",
        "retrained speedup",
        "retrained tok/s",
    ]
    assert len(body) == 3
    assert body[0][4:] == [
        "3.38 [3.20, 3.55]",
        "1.80 [1.70, 1.90]",
        "52.1",
        "2.90 [2.75, 3.05] -0.48*",
        "1.60 [1.50, 1.68] -0.20*",
        "46.0 -6.1",
    ]
    assert body[1][7] == "3.05 [2.85, 3.25] -0.10"


def test_paired_prompts_detect_a_shift_the_cis_cannot():
    acc_a, drafts = [60, 70, 40, 80, 55, 65], [30, 32, 25, 34, 28, 31]
    acc_b = [a - 3 for a in acc_a]  # every prompt loses 3 accepted tokens: a small, consistent drop
    a = [
        _row(
            "chat", 1, 3.10, (2.90, 3.30), 1.8, (1.7, 1.9), 50.0, per_request_accepted=acc_a, per_request_drafts=drafts
        )
    ]
    b = [
        _row(
            "chat", 1, 3.00, (2.80, 3.20), 1.8, (1.7, 1.9), 50.0, per_request_accepted=acc_b, per_request_drafts=drafts
        )
    ]
    assert cm.compact([("a", a), ("b", b)]).marked == []  # the CIs overlap
    paired = cm.compact([("a", a), ("b", b)], paired=True).rows[0].deltas["acceptance_length"][0]
    assert (paired.test, paired.beyond_noise) == ("paired bootstrap", True)
    same = cm.compact([("a", a), ("a#2", a)], paired=True).rows[0].deltas["acceptance_length"][0]
    assert (same.test, same.beyond_noise, same.delta) == ("paired bootstrap", False, 0)


def test_duplicate_cells_in_a_run_are_refused():
    with pytest.raises(BadInput, match="several rows"):
        cm.compact([("x", DEMO + DEMO[:1])])
