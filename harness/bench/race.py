"""A raced answer table (issue 52, bench.race): at each setting (suite, concurrency, temperature) every
arm — each (draft, k), reference drafts included — draws the setting's prompts in rounds of
bench.race_round_prompts beside one baseline arm, every arm's engine up at once, and an arm stops being
measured as soon as its rank is settled. The answer table asks which arm is fastest; an arm that
cannot be it need not be measured to the end.

The rule, successive elimination (Even-Dar, Mannor & Mansour 2006; "Hoeffding races", Maron & Moore
1994) on each arm's speedup interval:
- After each round every racing arm's speedup gets its paired bootstrap interval over the rounds and
  their requests (harness/bench/breakdown.py speedup_estimate) at level 1 − α/L: L is the number of
  looks the budget allows (its rounds), α = 0.05; widened as the rows' CIs are, by the machine's drift
  where the sentinels flag MACHINE NOISE and by its between-run SD where it has a record (each arm is
  one engine start). By Bonferroni over the looks, an arm's interval
  misses its true speedup at some look with probability ≤ α, so an arm truly the fastest leaves the
  race by mistake with probability ≤ 2α (its interval or the one that beat it missed).
- A candidate (a deployable arm; no speculation is one, at exactly 1.0x) leaves the race when another
  racing candidate's lower bound is above its upper bound: it cannot be the fastest. No speculation
  leaves when some arm's lower bound is above 1.0. A reference (oracle, random: not deployable,
  harness/results/answer.py) leaves when its interval is clear of every racing candidate's: its rank
  among them is settled.
- The race is over when one candidate is left (or every prompt of the budget is drawn): the arms
  still racing stop with it.
Each arm's cell holds exactly the prompts drawn while it raced, and the baseline arm's rounds up to
then: its row is an ordinary cell (the 95 % CI the answer table reads), with race_exit ("out": its
rank settled; "settled": racing when the race was over; "budget"), race_looks (L) and prompts_budget.
The rounds themselves (seeded order, arms rotated per repeat): harness/bench/rounds.py."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from harness.analysis.between_runs import Speedup, widened
from harness.analysis.machine import MachineReading, widen
from harness.bench.breakdown import speedup_estimate
from harness.bench.cell import MeasuredArms, MeasuredCell, arm_inputs, finish_cell
from harness.bench.grid import CellSpec
from harness.bench.planning import Prompts
from harness.bench.rounds import BASELINE, RoundArms, draw_order, rotated
from harness.bench.rows import ArmResult
from harness.bench.run_state import BenchRun
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Engine
from harness.results.answer import NONE, NOT_CANDIDATES

ALPHA = 0.05
Interval = tuple[float, float]


def looks_planned(budget: int, round_prompts: int) -> int:
    """The looks a budget of prompts allows: one after each round."""
    return max(1, math.ceil(budget / round_prompts))


def look_level(looks: int, alpha: float = ALPHA) -> float:
    """Each look's interval level: Bonferroni over the planned looks."""
    return 1 - alpha / max(1, looks)


def settled(intervals: Mapping[str, Interval | None], references: frozenset[str] = frozenset()) -> set[str]:
    """The racing arms (by name, `references` among them; NONE, no speculation at (1.0, 1.0), while it
    races) whose rank is settled at this look. An arm without an interval yet stays in and settles
    nothing. Pure; the rule is the module docstring's."""
    known = {a: iv for a, iv in intervals.items() if a not in references and iv is not None}
    out = {a for a, (_, hi) in known.items() if any(lo > hi for b, (lo, _) in known.items() if b != a)}
    racing = [iv for a, iv in known.items() if a not in out]
    for r in references:
        iv = intervals.get(r)
        if iv is not None and all(iv[1] < lo or iv[0] > hi for lo, hi in racing):
            out.add(r)
    return out


def race_over(intervals: Mapping[str, Interval | None], out: set[str], references: frozenset[str]) -> bool:
    """One candidate left racing (NONE counted while it races): the fastest is settled."""
    return len([a for a in intervals if a not in references and a not in out]) <= 1


@dataclass(frozen=True)
class Exit:
    """How one arm left the race: why ("out" / "settled" / "budget"), the prompts drawn by then."""

    why: str
    drawn: int


@dataclass(frozen=True)
class Race:
    """What a setting's race came to: each arm's exit by cell id, the budget and the looks planned."""

    exits: dict[str, Exit]
    budget: int
    looks: int

    def line(self, where: str) -> str:
        parts = [f"{cid} {e.why} after {e.drawn}" for cid, e in self.exits.items()]
        return f"[{where}] race of {len(self.exits)} arms, {self.budget} prompts, {self.looks} looks: " + "; ".join(
            parts
        )


class _Setting:
    """One setting's race as the rounds run it: the arms still racing, each exit, and the baseline arm
    and machine reading at each exit (what that arm's cell is finished with)."""

    def __init__(
        self, run: BenchRun, cells: list[CellSpec], drafts: Mapping[str, DraftUnderTest], engines, tokenizer, prompts
    ):
        self.run, self.cells, self.drafts, self.engines = run, cells, drafts, engines
        first = cells[0]
        self.full = arm_inputs(run, first, drafts[first.draft].verifier, tokenizer, prompts)
        self.budget = len(self.full.prompts)
        self.order = [self.full.prompts[i] for i in draw_order(self.budget, run.recipe.engine.seed)]
        self.looks = looks_planned(self.budget, run.recipe.bench.race_round_prompts)
        self.refs = frozenset(c.id for c in cells if c.draft in NOT_CANDIDATES)
        self.tau = run.between_runs.tau if run.between_runs else 0.0
        clock = run.clocks.get(drafts[first.draft].verifier.path)
        self.rec = RoundArms(run, first, {BASELINE: engines[BASELINE], **{c.id: engines[c.id] for c in cells}}, clock)
        self.racing = [c.id for c in cells]
        self.none_racing = True  # no speculation: a candidate until an arm is surely faster
        self.exits: dict[str, Exit] = {}
        self.snapshots: dict[str, tuple[ArmResult, MachineReading | None]] = {}
        self.drawn, self.turn = 0, 0

    def draw(self, batch: Prompts) -> None:
        """One round: every racing arm and the baseline on `batch`, once per repeat, in rotated order."""
        self.drawn += len(batch)
        for r in range(self.run.recipe.bench.repeats):
            for which in rotated((BASELINE, *self.racing), self.turn):
                self.rec.measure(which, replace(self.full, prompts=batch), r)
            self.turn += 1

    def look(self) -> bool:
        """The look after a round: the arms whose rank settled leave (all of them when one candidate is
        left); whether any arm still races."""
        level = look_level(self.looks)
        ivs = {cid: _interval(self.rec, cid, level, self.tau) for cid in self.racing}
        ivs |= {NONE: (1.0, 1.0)} if self.none_racing else {}
        out = settled(ivs, self.refs)
        over = race_over(ivs, out, self.refs)
        self.none_racing = self.none_racing and NONE not in out
        for cid in list(self.racing):
            if cid in out or over:
                self.leave(cid, "out" if cid in out else "settled")
        return bool(self.racing)

    def leave(self, cid: str, why: str) -> None:
        self.exits[cid] = Exit(why, self.drawn)
        self.snapshots[cid] = (copy.deepcopy(self.rec.arms[BASELINE]), self.rec.reading(cid))
        self.racing.remove(cid)

    def finish(self) -> list[tuple[CellSpec, MeasuredCell]]:
        """Each cell from the prompts drawn while it raced and the baseline arm's rounds up to its exit."""
        for cid in list(self.racing):
            self.leave(cid, "budget")
        out = []
        for c in self.cells:
            base_arm, reading = self.snapshots[c.id]
            arms = MeasuredArms(base_arm, self.rec.arms[c.id], self.cells[0].id, reading)
            inputs = replace(self.full, prompts=self.order[: self.exits[c.id].drawn])
            base = self.engines[BASELINE]
            m = finish_cell(self.run, c, self.drafts[c.draft], base, self.engines[c.id].kind, inputs, arms)
            for row in m.rows:
                row.prompts_budget, row.race_looks, row.race_exit = self.budget, self.looks, self.exits[c.id].why
            out.append((c, m))
        return out


def race_setting(
    run: BenchRun,
    cells: list[CellSpec],
    drafts: Mapping[str, DraftUnderTest],
    engines: Mapping[str, Engine],
    tokenizer,
    prompts: Prompts,
) -> tuple[list[tuple[CellSpec, MeasuredCell]], Race]:
    """Race one setting's cells (same suite, concurrency, temperature; one per (draft, k)), each on its
    speculative engine (`engines` by cell id, BASELINE the baseline engine); their measured cells and the
    race's record. `drafts` by label."""
    race, size = _Setting(run, cells, drafts, engines, tokenizer, prompts), run.recipe.bench.race_round_prompts
    for start in range(0, race.budget, size):
        race.draw(race.order[start : start + size])
        if race.drawn >= race.budget or not race.look():  # no look after the last round: the budget's
            break
    measured = race.finish()
    return measured, Race(race.exits, race.budget, race.looks)


def _interval(rec: RoundArms, cid: str, level: float, tau: float) -> Interval | None:
    """The arm's speedup interval at `level` as its row's CI would read now: the paired bootstrap over the
    rounds and their requests, widened by the machine's drift across the arms where the sentinels flag it
    (MACHINE NOISE, harness/analysis/machine.py) and by this machine's between-run SD `tau`
    (harness/bench/machine_record.py): a race on a machine that is not steady does not settle."""
    est = speedup_estimate(rec.arms[BASELINE], rec.arms[cid], level=level)
    if est is None or est.value is None or est.low is None or est.high is None:
        return None
    reading = rec.reading(cid)
    drift = reading.drift if reading is not None and reading.flag() is not None else 0.0
    s = widened(Speedup(est.value, *widen(est.low, est.high, est.value, drift)), tau, level)
    return None if s.low is None or s.high is None else (s.low, s.high)
