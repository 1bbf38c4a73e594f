"""The answer table (harness/results/answer.py): per suite and load, which arm at which k to deploy,
and by how much it beats the runner-up, no speculation included."""

from __future__ import annotations

from harness.results import answer
from harness.schema import CellRow
from tests.results_fixtures import rows_for


def cell(draft: str, method: str, k: int, speedup: float, ci=None, *, suite="chat", c=1, t=0.0, status="ok"):
    """The speculative row of a synthetic cell with the given speedup and 95 % CI."""
    row = rows_for("r", draft=draft, suite=suite, k=k, c=c, t=t, status=status)[1]
    row.update(method=method, speedup=speedup)
    if ci:
        row.update(speedup_ci_low=ci[0], speedup_ci_high=ci[1])
    return CellRow.from_dict(row)


def test_the_fastest_arm_at_its_best_k_wins_and_the_margin_is_over_the_next_arm():
    rows = [
        cell("draft", "eagle3", 2, 1.50, (1.40, 1.60)),
        cell("draft", "eagle3", 3, 1.70, (1.60, 1.80)),
        cell("ngram", "ngram", 3, 1.20, (1.10, 1.30)),
        cell("oracle", "eagle3", 3, 3.00, (2.90, 3.10)),  # an upper bound, not deployable
        cell("random", "eagle3", 3, 0.60, (0.50, 0.70)),  # a control
    ]
    [a] = answer.answers(rows)
    assert (a.best.arm, a.best.row.k) == ("draft (eagle3)", 3)
    assert a.runner_up.arm == "ngram" and a.runner_up.row.k == 3
    assert round(a.margin, 3) == round(1.70 / 1.20, 3) and a.clear is True
    text = answer.answer_rows(rows)[0]
    assert text[3:6] == ["draft (eagle3)", "3", "1.70x [1.60, 1.80]"] and text[-1] == "1.42x, clear"


def test_no_speculation_wins_where_every_arm_is_slower_and_overlapping_cis_are_within_noise():
    slow = [cell("draft", "eagle3", 3, 0.80, (0.70, 0.90), c=16), cell("ngram", "ngram", 3, 0.90, (0.85, 0.95), c=16)]
    [a] = answer.answers(slow)
    assert a.best.arm == answer.NONE and a.best.row is None and a.runner_up.arm == "ngram"
    assert a.clear is True  # ngram's CI excludes 1.0
    close = [cell("draft", "eagle3", 3, 1.05, (0.95, 1.15)), cell("ngram", "ngram", 3, 1.00, (0.90, 1.10))]
    [b] = answer.answers(close)
    assert b.best.arm == "draft (eagle3)" and b.runner_up.arm == answer.NONE and b.clear is False
    assert answer.margin_text(b) == "1.05x, within noise"


def test_one_answer_per_suite_and_load_and_failed_cells_are_not_candidates():
    rows = [
        cell("draft", "eagle3", 3, 1.6, (1.5, 1.7), suite="chat", c=1),
        cell("draft", "eagle3", 3, 1.1, (1.0, 1.2), suite="chat", c=4),
        cell("draft", "eagle3", 3, 1.4, (1.3, 1.5), suite="code", c=1, t=1.0),
        cell("ngram", "ngram", 3, 2.0, (1.9, 2.1), suite="code", c=1, t=1.0, status="failed"),
    ]
    got = [(a.suite, a.concurrency, a.temperature, a.best.arm) for a in answer.answers(rows)]
    assert got == [
        ("chat", 1, 0.0, "draft (eagle3)"),
        ("chat", 4, 0.0, "draft (eagle3)"),
        ("code", 1, 1.0, "draft (eagle3)"),
    ]
    assert answer.answers([cell("oracle", "eagle3", 3, 3.0)]) == []  # nothing deployable measured: no answer
