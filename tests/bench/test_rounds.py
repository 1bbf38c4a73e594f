"""What the round-drawing designs share (harness/bench/rounds.py): the order rounds draw prompts in and
the arms' order rotated per repeat. The rounds on real engines: tests/results/gate/test_paired_engine.py
(a sequential pair) and tests/bench/test_race_engine.py (a raced answer table)."""

from __future__ import annotations

from harness.bench.rounds import BASELINE, draw_order, rotated


def test_rounds_draw_a_seeded_permutation_of_every_prompt():
    order = draw_order(40, 0)
    assert sorted(order) == list(range(40)) and order != list(range(40))  # every prompt once, not file order
    assert draw_order(40, 0) == order and draw_order(40, 1) != order  # the recipe's seed fixes it


def test_each_arm_takes_every_place_in_turn():
    names = (BASELINE, "a", "b")
    orders = [rotated(names, t) for t in range(3)]
    assert orders == [(BASELINE, "a", "b"), ("a", "b", BASELINE), ("b", BASELINE, "a")]
    assert {o[0] for o in orders} == set(names)  # drift at a repeat's start falls on each arm alike
    assert rotated(names, 3) == names and rotated((), 5) == ()
