"""The paired gate on a run (issue 52): each cell of the candidate draft matched to the baseline
draft's cell at the same setting in the same run, their per-request records read from the cells'
side files (cells/requests/) and tested by harness/results/gate/paired.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.results.gate import paired as P
from harness.results.runs import Run, describe_setting
from harness.results.table import load_cell_requests
from harness.schema import CellRow


@dataclass(frozen=True)
class PairedCell:
    """One cell's paired verdict: AL first, then each per-position rate."""

    where: str
    suite: str
    estimates: tuple[P.PairedEstimate, ...]
    verdict: P.Verdict
    sequential: P.SequentialResult | None  # the group-sequential test over the same requests, in rounds
    problem: str | None = None  # why the cell could not be tested (then verdict inconclusive)
    rounds: str | None = None  # a cell the bench drew in rounds: how many prompts of its budget, and why it stopped

    def to_dict(self) -> dict:
        seq = self.sequential
        return {
            "cell": self.where,
            "verdict": self.verdict,
            "problem": self.problem,
            "estimates": [e.__dict__ for e in self.estimates],
            "sequential": None if seq is None else seq.__dict__,
            "rounds": self.rounds,
        }


def request_counts(run: Run, row: CellRow) -> list[P.RequestCounts]:
    side = load_cell_requests(run.path, row.cell_id) or {}
    return [P.counts_of(r, row.k) for r in side.get("speculative", [])]


def paired_cell(run: Run, cand: CellRow, base: CellRow, tolerance: float, round_size: int = 8) -> PairedCell:
    """A fixed-design cell is tested with the paired t interval, and its requests replayed in rounds show
    where the sequential rule would have stopped; a cell the bench drew in rounds (its rows'
    sequential_planned) is judged, for every metric, at the look it stopped on (its rows' sequential_looks)."""
    where = describe_setting(cand.setting)
    pairs = P.paired(request_counts(run, cand), request_counts(run, base))
    looks = round_looks(cand, base)
    if isinstance(looks, str):
        return PairedCell(where, cand.suite, (), "inconclusive", None, looks)
    ests = P.cell_estimates(pairs, cand.k, tolerance, looks)
    if not ests or ests[0].metric != "acceptance_length":
        why = f"{len(pairs)} paired requests with drafts (per-request records missing or too few)"
        return PairedCell(where, cand.suite, tuple(ests), "inconclusive", None, why)
    if looks is not None:  # the look the bench stopped on (its rounds drew these requests)
        seq = P.look(pairs, tolerance, looks)
        drew = (
            f"drawn in rounds: {cand.num_prompts} of {cand.prompts_budget} prompts, stopped on {cand.sequential_stop}"
        )
        return PairedCell(where, cand.suite, tuple(ests), P.cell_verdict(ests), seq, rounds=drew)
    # in a seeded random order, as a bench drawing prompts in rounds would (the side file's order
    # groups a conversation's turns)
    order = np.random.default_rng(0).permutation(len(pairs))
    seq = P.sequential_verdict([pairs[i] for i in order], tolerance, round_size)
    return PairedCell(where, cand.suite, tuple(ests), P.cell_verdict(ests), seq)


def round_looks(cand: CellRow, base: CellRow) -> P.Looks | None | str:
    """The looks a pair of cells drawn in rounds stopped on (None: the fixed design); a problem line where
    the two rows disagree or predate the recorded looks (their boundary cannot be rebuilt)."""
    if cand.sequential_planned is None and base.sequential_planned is None:
        return None
    if (cand.sequential_planned, cand.sequential_looks) != (base.sequential_planned, base.sequential_looks):
        return "the candidate's and the baseline draft's cells were not drawn in the same rounds: rerun the bench"
    if cand.sequential_planned is None or not cand.sequential_looks:
        return (
            "drawn in rounds without its looks recorded (a bench before the group-sequential gate): "
            "its stopping boundary cannot be rebuilt; rerun the bench"
        )
    return P.Looks(cand.sequential_planned, tuple(cand.sequential_looks))


def twins(run: Run, draft: str, baseline_draft: str) -> list[tuple[CellRow, CellRow | None]]:
    """Every ok speculative cell of `draft` with its `baseline_draft` twin at the same setting (None
    where the run has none)."""
    rows = [r for r in run.rows if r.is_speculative and r.ok]
    base = {r.setting: r for r in rows if r.draft == baseline_draft}
    return [(r, base.get(r.setting)) for r in rows if r.draft == draft]


def paired_cells(run: Run, draft: str, baseline_draft: str, tolerance: float) -> tuple[list[PairedCell], list[str]]:
    """Every ok speculative cell of `draft` with its `baseline_draft` twin; the cells without one."""
    out, missing = [], []
    for r, twin in twins(run, draft, baseline_draft):
        if twin is None:
            missing.append(f"{describe_setting(r.setting)}: no {baseline_draft} cell beside it")
        else:
            out.append(paired_cell(run, r, twin, tolerance))
    return out, missing


def baseline_draft_hash(run: Run, baseline_draft: str) -> str | None:
    return next((r.draft_hash for r in run.rows if r.draft == baseline_draft and r.draft_hash), None)
