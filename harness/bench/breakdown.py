"""A cell's derived columns beyond the pooled counters, from the arms' per-request records:
AL by output position, by prompt length, (when the outputs think) by thinking/answer segment, (in
multi-turn suites) by conversation turn and
(bench.k_from_one_engine) at every k' <= k estimated from this engine's steps, each with its CI;
the verifier's repetition; the speedup CI; the AL's standard error for the gate's power; and the
flags that explain an AL gap. Every definition is in harness/analysis/.

Inputs (harness.bench.rows): the speculative arm's `RequestRecord`s carry vLLM's per-step arrays
(`per_request_spec_decode_metrics="detailed"`); the baseline arm's outputs are the verifier's own.
Breakdowns need the arrays of every finished request: a server that gives only the summary
(an attached one started without "detailed") leaves them empty rather than half-counted.

Thinking vs answer: a cell is split when the tokenizer has a `</think>` token and at least one
output of the cell contains it (steps.answer_start: the answer starts after the first `</think>`;
an output that never closes it is all thinking). Outputs without thinking give no split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from harness.analysis import k_sweep, load, power, repetition, steps
from harness.schema import Breakdown, Bucket, CellRow
from harness.schema_requests import RequestRecord

# harness.bench.rows.ArmResult (rows imports this module, so not the other way round;
# tests/test_layers.py counts a TYPE_CHECKING import too, so it stays Any here)
ArmResult: TypeAlias = Any


@dataclass(frozen=True)
class RepeatRecord:
    """One repeat of one arm: its output tokens and wall time, and per request (prompt order) the
    tokens and latency (harness.analysis.load.ArmRepeat, for the speedup bootstrap)."""

    output_tokens: int
    wall_s: float
    request_ids: tuple[str, ...] = ()
    request_tokens: tuple[int, ...] = ()
    request_latency_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class CellContext:
    """What the cell knows beyond its arms: the draft's training context, the `</think>` token id."""

    k: int
    train_context_len: int | None = None
    end_think_id: int | None = None
    k_sweep: bool = False  # estimate AL at every k' < k from this cell's steps (bench.k_from_one_engine)
    interleaved: bool = True  # the arms' repeats ran A/B in turn (not with engines one at a time)


def prompt_of(request_id: str) -> str:
    """The prompt a request belongs to: ids are `<record id>#<turn>` (bench/arm.py)."""
    return request_id.rsplit("#", 1)[0]


def turn_of(request_id: str) -> int:
    """The conversation turn a request answered (0-based): ids are `<record id>#<turn>`."""
    tail = request_id.rpartition("#")[2]
    return int(tail) if tail.isdigit() else 0


def request_steps(records: Sequence[RequestRecord], end_think_id: int | None) -> list[steps.RequestSteps] | None:
    """Per-step records of every request, or None when any request lacks them."""
    if not records or not all(r.steps for r in records):
        return None
    thinking = end_think_id is not None and any(end_think_id in r.output_token_ids for r in records)
    return [
        steps.RequestSteps(
            r.accepted,
            r.drafted,
            r.prompt_tokens,
            steps.answer_start(r.output_token_ids, end_think_id, True)
            if thinking and end_think_id is not None
            else None,
            r.num_spec_tokens,
            turn_of(r.request_id),
        )
        for r in records
    ]


def _breakdown(labels: Sequence[str], splits: list[steps.Split]) -> Breakdown:
    """One bucket per split, labelled in order."""
    return Breakdown(
        [
            Bucket(
                label=label,
                al=s.acceptance_length,
                ci_low=s.ci[0] if s.ci else None,
                ci_high=s.ci[1] if s.ci else None,
                drafts=s.counters.num_drafts,
            )
            for label, s in zip(labels, splits)
        ]
    )


def fill_breakdowns(row: CellRow, spec: ArmResult, ctx: CellContext) -> None:
    """AL by output position, prompt length, segment and turn (module docstring)."""
    reqs = request_steps(spec.requests, ctx.end_think_id)
    if reqs is None:
        return
    out = row.breakdowns
    out.output_position = _breakdown(steps.bucket_labels(steps.OUTPUT_EDGES), steps.by_output_position(reqs, k=ctx.k))
    out.prompt_length = _breakdown(steps.bucket_labels(steps.PROMPT_EDGES), steps.by_prompt_length(reqs, k=ctx.k))
    if all(r.answer_start is not None for r in reqs):
        out.segment = _breakdown([steps.THINKING, steps.ANSWER], steps.by_segment(reqs, k=ctx.k))
    if any(r.turn for r in reqs):  # a multi-turn suite: AL per turn
        split = steps.by_turn(reqs, k=ctx.k)
        out.turn = _breakdown([x.label for x in split], split)
    if ctx.k_sweep:
        ks = range(1, ctx.k + 1)
        out.k = _breakdown([f"k={k}" for k in ks], [k_sweep.al_for_k(reqs, k) for k in ks])


def al_standard_error(spec: ArmResult) -> tuple[float | None, int | None]:
    """(SE of the pooled AL, prompts) with the prompt as the unit: a prompt's requests over
    repeats and turns are summed first (they are not independent: at T = 0 they repeat)."""
    by_prompt: dict[str, list[int]] = {}
    for r in spec.requests:
        acc = by_prompt.setdefault(prompt_of(r.request_id), [0, 0])
        acc[0] += sum(r.accepted)
        acc[1] += len(r.accepted)
    if not by_prompt or not all(r.steps for r in spec.requests):
        return None, len(by_prompt) or None
    pairs = [(a, d) for a, d in by_prompt.values() if d > 0]
    if len(pairs) < 2:
        return None, len(by_prompt)
    _, se, _ = power.se_from_counts([a for a, _ in pairs], [d for _, d in pairs])
    return se, len(by_prompt)


def _arm_repeat(rep: RepeatRecord, paired: bool) -> load.ArmRepeat:
    if not paired:
        return load.ArmRepeat(rep.output_tokens, rep.wall_s)
    return load.ArmRepeat(rep.output_tokens, rep.wall_s, rep.request_tokens, rep.request_latency_s)


def speedup_estimate(
    base: ArmResult, spec: ArmResult, interleaved: bool = True, level: float = 0.95
) -> load.Estimate | None:
    """Speedup and its bootstrap CI at `level` over the repeats, paired when `interleaved` (and, when both
    arms finished the same requests in every repeat, over requests too: analysis/load.py)."""
    if not base.repeats or not spec.repeats or (interleaved and len(base.repeats) != len(spec.repeats)):
        return None
    # per request where the repeats compared timed the same requests: each pair, or (not
    # interleaved) every repeat of both arms with the first speculative one
    pairs = (
        zip(base.repeats, spec.repeats)
        if interleaved
        else ((r, spec.repeats[0]) for r in (*base.repeats, *spec.repeats))
    )
    paired = all(
        b.request_ids == s.request_ids
        and len(b.request_latency_s) == len(b.request_ids)
        and len(s.request_latency_s) == len(s.request_ids)
        for b, s in pairs
    )
    return load.speedup_ci(
        [_arm_repeat(b, paired) for b in base.repeats],
        [_arm_repeat(s, paired) for s in spec.repeats],
        level=level,
        interleaved=interleaved,
    )


def workload_flags(row: CellRow, base: ArmResult, spec: ArmResult, ctx: CellContext) -> tuple[str | None, str | None]:
    """(looping flag, context flag) of the cell; fills repetition_share, prompt lengths."""
    rep = repetition.cell_repetition(list(base.outputs.values()))
    row.repetition_share, row.looping_requests = rep.share, rep.looping_requests
    lengths = [r.prompt_tokens for r in spec.requests if r.repeat == 0]  # each request once
    row.max_prompt_tokens = max(lengths, default=None)
    row.train_context_len = ctx.train_context_len
    return repetition.looping_flag(rep), repetition.context_flag(lengths, ctx.train_context_len)


def explained_gap(row: CellRow, tolerance: float, looping: str | None, beyond: str | None) -> list[str]:
    """The flags of a cell: the workload's (loops, long prompts), and the AL gap's explanation by the
    precedence of analysis/repetition.py (TRAIN/SERVE MISMATCH only when nothing else explains it)."""
    flags = [f for f in (looping, beyond) if f]
    why = repetition.explain_al_gap(row.al_gap, tolerance, beyond is not None, looping is not None)
    if why is None:
        return flags
    gap = (
        f"served AL {row.acceptance_length:.2f} vs predicted {row.predicted_acceptance_length:.2f} ({row.al_gap:+.0%})"
    )
    if why == repetition.MISMATCH:
        return [*flags, f"{why}: {gap}"]
    return [*flags, f"AL gap explained by {why}: {gap}"]


def derive(
    rb: CellRow, rs: CellRow, base: ArmResult, spec: ArmResult, ctx: CellContext
) -> tuple[str | None, str | None]:
    """Fill the speculative row's derived columns; returns the (looping, context) flags."""
    est = speedup_estimate(base, spec, ctx.interleaved)
    if est is not None:
        rs.speedup_ci_low, rs.speedup_ci_high = est.low, est.high
    rs.al_se, rs.num_prompts = al_standard_error(spec)
    fill_breakdowns(rs, spec, ctx)
    looping, beyond = workload_flags(rs, base, spec, ctx)
    rb.repetition_share, rb.looping_requests = rs.repetition_share, rs.looping_requests
    return looping, beyond
