"""A raced answer table's rule (harness/bench/race.py): which arms leave the race at a look, when the
race is over, the looks' level, and the answer table's note on it. The race on real engines:
tests/bench/test_race_engine.py."""

from __future__ import annotations

import math

import pytest

from harness.analysis.between_runs import Speedup, widened
from harness.bench.race import look_level, looks_planned, race_over, settled
from harness.results.answer import NONE, answers, race_notes
from harness.schema import CellRow
from tests.results_fixtures import rows_for

NO_SPEC = {NONE: (1.0, 1.0)}


def test_a_candidate_leaves_when_another_is_surely_faster():
    ivs = {"draft": (1.4, 1.6), "ngram": (1.1, 1.3), **NO_SPEC}
    out = settled(ivs)
    assert out == {"ngram", NONE}  # ngram's upper bound below the draft's lower; both above no speculation
    assert race_over(ivs, out, frozenset())


def test_overlapping_candidates_keep_racing():
    ivs = {"draft": (1.2, 1.5), "ngram": (1.1, 1.3), **NO_SPEC}
    out = settled(ivs)
    assert out == {NONE}
    assert not race_over(ivs, out, frozenset())


def test_a_slower_than_baseline_arm_leaves_and_no_speculation_can_win():
    ivs = {"draft": (0.5, 0.7), **NO_SPEC}
    out = settled(ivs)
    assert out == {"draft"} and race_over(ivs, out, frozenset())


def test_an_arm_without_an_interval_stays_and_settles_nothing():
    ivs = {"draft": None, "ngram": (1.5, 1.7), **NO_SPEC}
    out = settled(ivs)
    assert out == {NONE}  # the draft may still be faster: it races on
    assert not race_over(ivs, out, frozenset())


def test_a_reference_leaves_once_clear_of_every_racing_candidate():
    refs = frozenset({"random", "oracle"})
    ivs = {"draft": (1.2, 1.5), "ngram": (1.1, 1.3), "random": (0.6, 0.7), "oracle": (1.2, 2.0), **NO_SPEC}
    out = settled(ivs, refs)
    # random is below every candidate; the oracle overlaps the draft: its rank is not settled
    assert out == {NONE, "random"}
    # references neither win nor keep the race going: one candidate left is the end
    ivs2 = {"draft": (1.4, 1.6), "ngram": (1.1, 1.3), "oracle": (1.5, 2.5), **NO_SPEC}
    out2 = settled(ivs2, refs)
    assert "oracle" not in out2 and race_over(ivs2, out2, refs)


def test_a_reference_faster_than_every_candidate_does_not_knock_them_out():
    refs = frozenset({"oracle"})
    ivs = {"draft": (1.2, 1.4), "oracle": (2.5, 3.0), **NO_SPEC}
    assert settled(ivs, refs) == {NONE, "oracle"}


def test_looks_and_their_level():
    assert looks_planned(40, 8) == 5 and looks_planned(41, 8) == 6 and looks_planned(3, 8) == 1
    assert look_level(5) == pytest.approx(0.99)  # Bonferroni: 0.05 over 5 looks
    assert look_level(1) == pytest.approx(0.95)


def test_a_look_widens_by_the_machines_between_run_sd_at_its_own_level():
    def w(value, low, high, level, tau):
        s = widened(Speedup(value, low, high), tau, level)
        return (s.low, s.high)

    assert w(1.2, 1.1, 1.3, 0.99, 0.0) == (1.1, 1.3)  # no record: the run's own
    low, high = w(1.2, 1.1, 1.3, 0.99, 0.05)
    assert low < 1.1 and high > 1.3
    # at 99 % a between-run SD of 0.05 alone spans exp(±2.576 × 0.05) around the value
    low0, high0 = w(1.2, 1.2 - 1e-12, 1.2 + 1e-12, 0.99, 0.05)
    assert low0 == pytest.approx(1.2 * math.exp(-2.5758 * 0.05), rel=1e-4)
    assert high0 == pytest.approx(1.2 * math.exp(2.5758 * 0.05), rel=1e-4)


def _row(draft: str, k: int, sp: float, exit_: str, n: int) -> CellRow:
    row = rows_for("r", draft=draft, suite="chat", k=k, c=4, t=0.0)[1]
    row.update(
        method="ngram" if draft == "ngram" else "eagle3",
        speedup=sp,
        speedup_ci_low=sp - 0.1,
        speedup_ci_high=sp + 0.1,
        num_prompts=n,
        prompts_budget=40,
        race_looks=5,
        race_exit=exit_,
    )
    return CellRow.from_dict(row)


def test_the_answer_table_says_how_each_setting_was_raced():
    rows = [_row("draft", 3, 1.5, "settled", 24), _row("ngram", 3, 1.1, "out", 16)]
    (a,) = answers(rows)
    assert a.best.arm == "draft (eagle3)" and a.clear
    (note,) = race_notes(rows)
    assert note.startswith("chat c=4 T=0: raced over 40 prompts (5 looks, each at 99.0%)")
    assert "draft (eagle3) k=3 settled after 24; ngram k=3 out after 16" in note
    assert note.endswith("40 of 80 arm-prompts measured (50%)")
    assert race_notes([_row("draft", 3, 1.5, "settled", 24).model_copy(update={"race_exit": None})]) == []  # not raced
