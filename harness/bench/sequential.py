"""A sequential paired cell (issue 52, gate.max_prompts): the candidate draft's cell and its
gate.baseline_draft twin draw their suite's prompts in rounds of gate.round_prompts and stop as soon as
the paired AL verdict is settled, or at the budget.

Both drafts' speculative engines are up together beside the baseline engine. Each round runs, per
repeat, the three arms (no speculation, the candidate, the baseline draft) on the round's prompts in an
order that rotates from one repeat to the next, so the machine's drift falls on each arm alike. Each
arm accumulates over the rounds: a round's repeat is one of the arm's repeats (a RepeatRecord), paired
in time with the baseline arm's, so the speedup's bootstrap resamples rounds, then their requests
(harness/analysis/load.py). The prompts are drawn in a seeded order (engine.seed): a suite file's own
order groups its topics, and the first rounds should stand for the whole suite.

After each round, once enough pairs are in (paired.MIN_SEQUENTIAL_LOOK, or the whole budget), the
group-sequential test of harness/results/gate/paired.py looks at every paired request so far, for AL
and each per-position rate, and the gate's own cell verdict over those intervals decides: pass (AL
passes, no material rate fails) or fail (any material metric fails) stops the cell. Its boundaries
spend each one-sided alpha over the budget's paired requests (its prompts' turns × repeats) look by
look, so stopping early keeps each error at <= alpha (per metric, as the fixed test's). The rows record
the budget, the planned pairs, the pairs at every look and why the rounds stopped, and the gate judges
them with the boundary they stopped on: a fixed-n t interval read after an optional stop would not hold
its error rates."""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.bench.cell import MeasuredArms, MeasuredCell, arm_inputs, finish_cell
from harness.bench.grid import CellSpec
from harness.bench.planning import Prompts
from harness.bench.rounds import BASELINE, RoundArms, draw_order, rotated
from harness.bench.rows import ArmResult
from harness.bench.run_state import BenchRun
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Engine
from harness.results.gate import paired as P

ARMS = (BASELINE, "candidate", "baseline_draft")


@dataclass(frozen=True)
class Rounds:
    """What the rounds of a pair came to: why they stopped ("pass" / "fail": the verdict settled,
    "budget": every prompt drawn), the prompts drawn of the budget, the paired requests the budget
    makes (the looks' information is a share of them), and the last look (None: it never had enough
    pairs to look)."""

    stop: str
    drawn: int
    budget: int
    planned: int
    last: P.SequentialResult | None

    def line(self, where: str) -> str:
        last = self.last
        seen = (
            f", paired AL {last.estimate:+.1%} [{last.low:+.1%}, {last.high:+.1%}] at look {last.looks}" if last else ""
        )
        why = "verdict settled" if self.stop != "budget" else "budget reached"
        return f"[{where}] sequential: {self.stop} ({why}) after {self.drawn} of {self.budget} prompts{seen}"


def planned_pairs(prompts: Prompts, repeats: int) -> int:
    """Paired requests the budget's prompts make: each turn of each record, once per repeat."""
    return repeats * sum(rec.num_turns for rec, _ in prompts)


def arm_counts(arm: ArmResult, k: int) -> list[P.RequestCounts]:
    return [P.counts_of(r.to_dict(), k) for r in arm.requests]


def round_verdict(
    cand: ArmResult, base: ArmResult, k: int, tolerance: float, looks: P.Looks
) -> tuple[P.Verdict, P.SequentialResult | None, P.Looks]:
    """The look after a round (`looks`: those before it): the gate's own cell verdict
    (paired.cell_verdict) over every metric's interval at this look (AL passes and no material rate
    fails: pass; any material metric fails: fail), AL's look for the record, and the looks with this one
    added. No look (inconclusive) before the first look's pairs, or when the round added no pair."""
    pairs = P.paired(arm_counts(cand, k), arm_counts(base, k))
    n = len(pairs)
    if n < min(P.MIN_SEQUENTIAL_LOOK, looks.planned) or (looks.at and n <= looks.at[-1]):
        return "inconclusive", None, looks
    now = looks.then(n)
    al = P.look(pairs, tolerance, now)
    if al is None:
        return "inconclusive", None, looks
    ests = P.cell_estimates(pairs, k, tolerance, now)
    if not ests or ests[0].metric != "acceptance_length":
        return "inconclusive", al, now
    return P.cell_verdict(ests), al, now


def measure_in_rounds(
    run: BenchRun,
    cells: tuple[CellSpec, CellSpec],
    drafts: tuple[DraftUnderTest, DraftUnderTest],
    engines: tuple[Engine, Engine, Engine],
    tokenizer,
    prompts: Prompts,
) -> tuple[tuple[MeasuredCell, MeasuredCell], Rounds]:
    """The candidate's cell and its baseline-draft twin (same setting), measured in rounds on
    (baseline, candidate, baseline-draft) engines; their measured cells and how the rounds ended."""
    g, b = run.recipe.gate, run.recipe.bench
    assert g.max_prompts is not None  # the loop measures in rounds only with a budget
    cell = cells[0]
    full = arm_inputs(run, cell, drafts[0].verifier, tokenizer, prompts)
    budget = min(g.max_prompts, len(full.prompts))
    order = [full.prompts[i] for i in draw_order(len(full.prompts), run.recipe.engine.seed)[:budget]]
    planned = planned_pairs(order, b.repeats)
    rec = RoundArms(run, cell, dict(zip(ARMS, engines, strict=True)), run.clocks.get(drafts[0].verifier.path))
    drawn: Prompts = []
    last: P.SequentialResult | None = None
    looks = P.Looks(planned, ())
    stop, turn = "budget", 0
    for start in range(0, budget, g.round_prompts):
        batch = order[start : start + g.round_prompts]
        drawn = drawn + batch
        for r in range(b.repeats):
            for which in rotated(ARMS, turn):
                rec.measure(which, replace(full, prompts=batch), r)
            turn += 1
        verdict, al, looks = round_verdict(
            rec.arms["candidate"], rec.arms["baseline_draft"], cell.k, g.tolerance, looks
        )
        last = al or last
        if verdict != "inconclusive":
            stop = verdict
            break
    measured = []
    for i, (c, d) in enumerate(zip(cells, drafts, strict=True)):
        which = ARMS[1 + i]
        arms = MeasuredArms(rec.arms[BASELINE], rec.arms[which], cell.id, rec.reading(which))
        m = finish_cell(run, c, d, engines[0], engines[1 + i].kind, replace(full, prompts=drawn), arms)
        for row in m.rows:
            row.prompts_budget, row.sequential_planned, row.sequential_stop = budget, planned, stop
            row.sequential_looks = list(looks.at)
        measured.append(m)
    return (measured[0], measured[1]), Rounds(stop, len(drawn), budget, planned, last)
