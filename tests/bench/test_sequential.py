"""A sequential paired cell's pure parts (harness/bench/sequential.py): the order rounds draw prompts
in, the paired requests a budget makes, and the look after a round, which is the gate's own cell
verdict at a boundary that counts the looks before it. The rounds on real engines:
tests/results/gate/test_paired_engine.py."""

from __future__ import annotations

import numpy as np

from harness.bench.rows import ArmResult
from harness.bench.sequential import Rounds, planned_pairs, round_verdict
from harness.prompts import PromptRecord
from harness.results.gate import paired as P
from harness.schema_requests import RequestRecord


def _arm(n: int, p_accept: float, seed: int, k: int = 3) -> ArmResult:
    """An arm of n requests, 30 verify steps each of k drafted tokens, per-prompt acceptance varying."""
    rng = np.random.default_rng(seed)
    arm = ArmResult()
    for i in range(n):
        p = float(np.clip(rng.normal(p_accept, 0.15), 0.05, 0.95))
        acc = tuple(int(a) for a in np.minimum(rng.geometric(1 - p, 30) - 1, k))
        arm.requests.append(
            RequestRecord(
                request_id=f"q{i}#0", repeat=0, prompt_tokens=8, output_token_ids=(), accepted=acc, drafted=(k,) * 30
            )
        )
    return arm


def test_the_budget_plans_every_turn_once_per_repeat():
    one = PromptRecord(id="a", prompt="hi")
    three = PromptRecord(id="b", turns=("hi", "more", "again"))
    assert planned_pairs([(one, [1]), (three, [1])], repeats=2) == 2 * (1 + 3)


def test_a_round_stops_on_the_gates_verdict_and_not_before_the_first_look():
    none = P.Looks(40, ())
    same = _arm(40, 0.6, 0)
    verdict, _, looks = round_verdict(same, same, 3, 0.05, none)
    assert verdict == "pass" and looks == P.Looks(40, (40,))  # a draft against itself: settled at once
    early = _arm(8, 0.6, 0)
    assert round_verdict(early, early, 3, 0.05, none) == ("inconclusive", None, none)  # 8 pairs: no look before 16
    # a round that added no pair is no look (the boundary would spend error on nothing new)
    assert round_verdict(same, same, 3, 0.05, P.Looks(40, (40,)))[2] == P.Looks(40, (40,))
    worse = ArmResult(requests=[])
    rng = np.random.default_rng(1)
    for r in same.requests:  # every accepted token kept with probability 0.6: AL ~ -25 %
        thinned = tuple(int(rng.binomial(a, 0.6)) for a in r.accepted)
        worse.requests.append(RequestRecord(**{**r.to_dict(), "accepted": thinned}))
    earlier = P.Looks(80, (16, 24))
    verdict, al, looks = round_verdict(worse, same, 3, 0.05, earlier)
    assert verdict == "fail" and al is not None and al.high < -0.05 and al.looks == 3
    assert looks == P.Looks(80, (16, 24, 40))
    pairs = P.paired(
        [P.counts_of(r.to_dict(), 3) for r in worse.requests], [P.counts_of(r.to_dict(), 3) for r in same.requests]
    )
    assert al == P.look(pairs, 0.05, looks)


def test_the_rounds_line_says_why_they_stopped():
    last = P.SequentialResult("pass", 17, 1, 0.035, -0.013, 0.082)
    assert Rounds("pass", 8, 40, 87, last).line("c") == (
        "[c] sequential: pass (verdict settled) after 8 of 40 prompts, paired AL +3.5% [-1.3%, +8.2%] at look 1"
    )
    assert (
        Rounds("budget", 38, 38, 38, None).line("c") == "[c] sequential: budget (budget reached) after 38 of 38 prompts"
    )
