"""Which speculator to deploy: per suite and load (concurrency, temperature), the arm and k with the
highest measured speedup, and its margin over the best other arm, no speculation included.

An arm is a draft under test (its label and method: a trained EAGLE-3 draft, `ngram`, a k schedule,
...). `oracle` (an upper bound that copies the verifier) and `random` (an untrained control) are
references, not candidates. No speculation is always a candidate, at exactly 1.0x. The margin is
best ÷ runner-up speedup; it is `clear` when the two 95 % CIs do not overlap (no speculation has no CI:
it is clear when the other arm's CI excludes 1.0), else `within noise`: the two are not told apart by
this run, whatever the point estimates say. Pure functions over typed rows; the report, `harness
compare` and the main job's summary render them.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.schema import CellRow
from harness.ui import MISSING, fmt, fmt_ci

NOT_CANDIDATES = ("oracle", "random")
NONE = "no speculation"
HEADERS = ("suite", "c", "T", "deploy", "k", "speedup [95% CI]", "AL", "runner-up", "margin")


@dataclass(frozen=True)
class Choice:
    """One candidate at its best k: `row` None is no speculation (1.0x, no CI)."""

    arm: str
    row: CellRow | None

    @property
    def speedup(self) -> float:
        return 1.0 if self.row is None else float(self.row.speedup or 0.0)

    @property
    def ci(self) -> tuple[float, float] | None:
        r = self.row
        if r is None:
            return (1.0, 1.0)
        if r.speedup_ci_low is None or r.speedup_ci_high is None:
            return None
        return (r.speedup_ci_low, r.speedup_ci_high)


@dataclass(frozen=True)
class Answer:
    suite: str
    concurrency: int
    temperature: float
    best: Choice
    runner_up: Choice | None

    @property
    def margin(self) -> float | None:
        if self.runner_up is None or self.runner_up.speedup <= 0:
            return None
        return self.best.speedup / self.runner_up.speedup

    @property
    def clear(self) -> bool | None:
        """True when best and runner-up's CIs do not overlap; None when either lacks a CI."""
        if self.runner_up is None:
            return None
        a, b = self.best.ci, self.runner_up.ci
        if a is None or b is None:
            return None
        return a[0] > b[1]


def arm_name(r: CellRow) -> str:
    """The arm's name: its label, with the method when the label does not already say it."""
    return r.draft if r.method in r.draft else f"{r.draft} ({r.method})"


def candidates(rows: list[CellRow]) -> list[CellRow]:
    """Speculative cells that finished with a speedup, of deployable arms."""
    return [r for r in rows if r.is_speculative and r.ok and r.speedup is not None and r.draft not in NOT_CANDIDATES]


def _best_per_arm(rows: list[CellRow]) -> list[Choice]:
    """Each arm at its fastest k (ties: the smaller k), fastest arm first."""
    by_arm: dict[str, CellRow] = {}
    for r in rows:
        name = arm_name(r)
        cur = by_arm.get(name)
        if cur is None or (r.speedup or 0.0, -r.k) > (cur.speedup or 0.0, -cur.k):
            by_arm[name] = r
    choices = [Choice(a, r) for a, r in by_arm.items()] + [Choice(NONE, None)]
    return sorted(choices, key=lambda c: (-c.speedup, c.row is not None))  # a tie: no speculation is cheaper


def answers(rows: list[CellRow]) -> list[Answer]:
    """One answer per (suite, concurrency, temperature) where at least one candidate was measured."""
    groups: dict[tuple[str, int, float], list[CellRow]] = {}
    for r in candidates(rows):
        groups.setdefault((r.suite, r.concurrency, r.temperature), []).append(r)
    out = []
    for (suite, c, t), rs in sorted(groups.items()):
        ranked = _best_per_arm(rs)
        out.append(Answer(suite, c, t, ranked[0], ranked[1] if len(ranked) > 1 else None))
    return out


def _x(ch: Choice) -> str:
    ci = ch.ci
    if ch.row is None:
        return "1.00x"
    return f"{ch.speedup:.2f}x" + fmt_ci(*(ci or (None, None)))


def margin_text(a: Answer) -> str:
    m = a.margin
    if m is None:
        return MISSING
    verdict = {True: "clear", False: "within noise", None: "no CI"}[a.clear]
    return f"{m:.2f}x, {verdict}"


def short_text(a: Answer) -> str:
    """One cell of `harness compare`'s answer table: "arm k=K speedup [CI]; margin"."""
    b = a.best
    k = "" if b.row is None else f" k={b.row.k}"
    return f"{b.arm}{k} {_x(b)}; {margin_text(a)}"


def not_weighed(device: str | None) -> list[str]:
    """The methods an answer table on this device could not weigh, each with the reason; on GPUs
    vLLM serves them all (harness/engine/method_limits.py)."""
    from harness.engine.method_limits import not_weighed_on_cpu

    return not_weighed_on_cpu() if device == "cpu" else []


def answer_rows(rows: list[CellRow]) -> list[list[str]]:
    """The answer table's text rows (HEADERS)."""
    out = []
    for a in answers(rows):
        b, r = a.best, a.runner_up
        out.append(
            [
                a.suite,
                str(a.concurrency),
                f"{a.temperature:g}",
                b.arm,
                MISSING if b.row is None else str(b.row.k),
                _x(b),
                fmt(None if b.row is None else b.row.acceptance_length, "{:.2f}"),
                MISSING if r is None else f"{r.arm}" + ("" if r.row is None else f" k={r.row.k}") + f" {_x(r)}",
                margin_text(a),
            ]
        )
    return out


def race_notes(rows: list[CellRow]) -> list[str]:
    """Per raced setting (bench.race, harness/bench/race.py): the prompts each arm was measured on before
    its rank settled, and the share of the fixed design's arm-prompts the race spent."""
    groups: dict[tuple[str, int, float], list[CellRow]] = {}
    for r in rows:
        if r.is_speculative and r.race_exit and r.prompts_budget:
            groups.setdefault((r.suite, r.concurrency, r.temperature), []).append(r)
    out = []
    for (suite, c, t), rs in sorted(groups.items()):
        budget, looks = rs[0].prompts_budget or 0, rs[0].race_looks or 1
        spent = sum(r.num_prompts or 0 for r in rs)
        arms = "; ".join(f"{arm_name(r)} k={r.k} {r.race_exit} after {r.num_prompts}" for r in rs)
        out.append(
            f"{suite} c={c} T={t:g}: raced over {budget} prompts ({looks} looks, each at {1 - 0.05 / looks:.1%}): "
            f"{arms}; {spent} of {budget * len(rs)} arm-prompts measured ({spent / (budget * len(rs)):.0%})"
        )
    return out
