"""Acceptance broken down from vLLM's per-step record of each request (issue 13).

Source: vLLM 0.32 with `per_request_spec_decode_metrics="detailed"` records, per finished
single-sequence request, `RequestSpecDecodeMetrics` (vllm/v1/metrics/stats.py), surfaced as
`RequestOutput.outputs[0].spec_decode_metrics` offline and, from its `to_dict()`, as
`metrics.speculative_decoding` in a server response:

  per_step_accepted[s]   draft tokens accepted at verify step s (j, 0 … k), in step order
  per_step_drafted[s]    draft tokens proposed at step s (after grammar-invalidated ones are removed)
  num_spec_steps, num_accepted_draft_tokens, num_draft_tokens, num_spec_tokens, acceptance_histogram
                         the summary: sums of the arrays, and k (num_speculative_tokens)

A step is recorded only when it carried draft tokens, so one step = one draft, exactly as the
`vllm:spec_decode_*` counters count them.

Pooled counters over any selection of steps (the measure.py counters, so its formulas apply):
  num_drafts           = steps selected
  num_draft_tokens     = Σ drafted
  num_accepted_tokens  = Σ accepted
  accepted_per_pos[i]  = steps with accepted > i   (accepted drafts are a prefix: position i
                         accepted implies 0 … i−1 were; vLLM counts the same way)
  AL = 1 + num_accepted_tokens / num_drafts, includes the bonus token (measure.acceptance_length).
Summed over all steps of all requests these equal the cell's pooled counters exactly.

Output-token position of step s: the prefill emits output token 0 (no verify step), and step t
emits accepted[t] + 1 tokens (accepted drafts plus the verifier's bonus/correction token), so
  position[s] = 1 + Σ_{t<s} (accepted[t] + 1),
the position of the first token step s emits. Two caveats: the last step may emit past a stop
(EOS, max_tokens) whose extra tokens are discarded, and steps that carried no drafts (dynamic k = 0,
a draft length cut at max_model_len) are not recorded, so positions after them read low.

Splits (each step goes wholly to one group, so the groups' counters sum to the pooled counters):
  segment          thinking = steps whose position < answer_start, answer = the rest, where
                   answer_start = the output position just after `</think>` (the closing tag counts
                   as thinking); 0 when thinking is off (all answer), the output length when the
                   thinking never closed (all thinking). A step straddling the boundary (it starts
                   in thinking and emits tokens past answer_start) counts as thinking: a step goes
                   to the segment of its first emitted token, the context its draft was proposed
                   from. `straddling_steps` counts them, so the rule's weight is visible.
  output position  buckets of the step's position, default 0–63, 64–255, 256+.
  prompt length    buckets of the request's prompt tokens (all of a request's steps together).

CIs: per group, the request is the resampling unit (measure.bootstrap_ci on each request's sums
within the group: same method, seed and level as the cell's AL CI); requests with no step in the
group do not enter it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from harness.engine.counters import SpecCounters
from harness.errors import BadInput
from harness.metrics import acceptance_length, bootstrap_ci

FIRST_STEP_POSITION = 1  # output token 0 comes from the prefill, before any verify step
OUTPUT_EDGES = (64, 256)
PROMPT_EDGES = (512, 1024, 2048)
THINKING, ANSWER = "thinking", "answer"


@dataclass(frozen=True)
class RequestSteps:
    """One request's ordered verify steps, and what places them (prompt length, answer start)."""

    accepted: tuple[int, ...]
    drafted: tuple[int, ...]
    prompt_tokens: int | None = None
    answer_start: int | None = None  # first output position of the answer segment
    num_spec_tokens: int | None = None  # k the engine ran with (the per-position length)
    turn: int = 0  # the conversation turn it answered (0: the first; multi-turn suites feed answers back)

    def __post_init__(self):
        if len(self.accepted) != len(self.drafted):
            raise BadInput(
                f"per-step arrays differ in length ({len(self.accepted)} accepted vs "
                f"{len(self.drafted)} drafted); pass vLLM's per_step_accepted/per_step_drafted unchanged"
            )
        if any(a < 0 for a in self.accepted) or any(d < 0 for d in self.drafted):
            raise BadInput("per-step counts must be >= 0; pass vLLM's per_step_accepted/per_step_drafted unchanged")

    def positions(self, first: int = FIRST_STEP_POSITION) -> np.ndarray:
        """Output position of the first token each step emits."""
        emitted = np.asarray(self.accepted, dtype=np.int64) + 1
        return first + np.concatenate(([0], np.cumsum(emitted)[:-1])) if len(emitted) else emitted


def from_vllm(
    metrics: Mapping[str, Any] | Any, *, prompt_tokens: int | None = None, answer_start: int | None = None
) -> RequestSteps:
    """RequestSteps from vLLM's per-request metrics: the `to_dict()` payload (server JSON
    `metrics.speculative_decoding`) or the `RequestSpecDecodeMetrics` object itself."""
    get: Callable[..., Any] = (
        metrics.get if isinstance(metrics, Mapping) else lambda name, default=None: getattr(metrics, name, default)
    )
    accepted, drafted = list(get("per_step_accepted") or []), list(get("per_step_drafted") or [])
    steps = get("num_spec_steps")
    if steps is None and get("histogram") is not None:
        steps = sum(get("histogram"))
    if steps and not accepted:
        raise BadInput(
            "vLLM returned no per-step arrays (summary level): start the engine with "
            "per_request_spec_decode_metrics='detailed'"
        )
    if steps is not None and steps != len(accepted):
        raise BadInput(
            f"vLLM's per-request metrics disagree: num_spec_steps {steps} vs {len(accepted)} per-step entries"
        )
    total = get("num_accepted_draft_tokens")
    if total is not None and total != sum(accepted):
        raise BadInput(f"vLLM's per-request metrics disagree: {total} accepted vs per-step sum {sum(accepted)}")
    return RequestSteps(
        tuple(int(a) for a in accepted),
        tuple(int(d) for d in drafted),
        prompt_tokens,
        answer_start,
        get("num_spec_tokens"),
    )


def answer_start(output_token_ids: Sequence[int], end_think_id: int, thinking: bool) -> int:
    """First output position of the answer: 0 with thinking off, just after the first `</think>`,
    or the output length when the thinking never closed (a truncated output is all thinking)."""
    if not thinking:
        return 0
    ids = list(output_token_ids)
    return ids.index(end_think_id) + 1 if end_think_id in ids else len(ids)


def _k(requests: Sequence[RequestSteps]) -> int:
    ks = [r.num_spec_tokens for r in requests if r.num_spec_tokens]
    return max(ks) if ks else max((max(r.drafted, default=0) for r in requests), default=0)


def step_counters(req: RequestSteps, mask: np.ndarray | None = None, k: int | None = None) -> SpecCounters:
    """Counters of the selected steps of one request (all steps when mask is None)."""
    acc = np.asarray(req.accepted, dtype=np.int64)
    drafted = np.asarray(req.drafted, dtype=np.int64)
    if mask is not None:
        acc, drafted = acc[mask], drafted[mask]
    k = _k([req]) if k is None else k
    per_pos = tuple(int((acc > i).sum()) for i in range(k))
    return SpecCounters(len(acc), int(drafted.sum()), int(acc.sum()), per_pos)


def pooled_counters(requests: Sequence[RequestSteps], k: int | None = None) -> SpecCounters:
    """All steps of all requests: the cell's counters."""
    k = _k(requests) if k is None else k
    total = SpecCounters(accepted_per_pos=(0,) * k)
    for r in requests:
        total = total + step_counters(r, None, k)
    return total


@dataclass(frozen=True)
class Split:
    """One group of steps: its pooled counters, AL and the AL's CI over requests."""

    label: str
    counters: SpecCounters
    per_request_accepted: tuple[int, ...]  # requests with >= 1 step in the group
    per_request_drafts: tuple[int, ...]
    acceptance_length: float | None
    ci: tuple[float, float] | None

    @property
    def num_requests(self) -> int:
        return len(self.per_request_drafts)


def split_steps(
    requests: Sequence[RequestSteps],
    group_of: Callable[[RequestSteps], np.ndarray],
    labels: Sequence[str],
    k: int | None = None,
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> list[Split]:
    """Group every step (group_of gives each step's group index into labels) and pool each group."""
    k = _k(requests) if k is None else k
    totals = [SpecCounters(accepted_per_pos=(0,) * k) for _ in labels]
    per_req: list[list[tuple[int, int]]] = [[] for _ in labels]
    for r in requests:
        groups = np.asarray(group_of(r), dtype=np.int64)
        for g in np.unique(groups):
            c = step_counters(r, groups == g, k)
            totals[g] = totals[g] + c
            per_req[g].append((c.num_accepted_tokens, c.num_drafts))
    out = []
    for label, total, pairs in zip(labels, totals, per_req, strict=True):
        acc, drafts = tuple(a for a, _ in pairs), tuple(d for _, d in pairs)
        ci = bootstrap_ci(acc, drafts, level, num_resamples, seed)
        out.append(Split(label, total, acc, drafts, acceptance_length(total), ci))
    return out


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """(64, 256) -> ['0-63', '64-255', '256+']: inclusive integer ranges."""
    bounds = [0, *edges]
    return [f"{lo}-{hi - 1}" for lo, hi in pairwise(bounds)] + [f"{bounds[-1]}+"]


def _check_edges(edges: Sequence[int], what: str) -> None:
    if not edges or any(e <= 0 for e in edges) or list(edges) != sorted(set(edges)):
        raise BadInput(f"{what} bucket edges {list(edges)} must be positive and increasing, e.g. (64, 256)")


def _segment_of(r: RequestSteps) -> np.ndarray:
    if r.answer_start is None:
        raise BadInput(
            "a request has no answer_start: give each request its thinking/answer boundary "
            "(steps.answer_start(output_ids, end_think_id, thinking))"
        )
    return (r.positions() >= r.answer_start).astype(np.int64)  # 0 thinking, 1 answer


def by_segment(requests: Sequence[RequestSteps], **kw) -> list[Split]:
    """[thinking, answer]; a segment with no steps has AL None (e.g. thinking off)."""
    return split_steps(requests, _segment_of, [THINKING, ANSWER], **kw)


def straddling_steps(requests: Sequence[RequestSteps]) -> int:
    """Steps that start in thinking and emit tokens past answer_start (counted as thinking)."""
    n = 0
    for r in requests:
        if r.answer_start is None:
            continue
        start = r.positions()
        end = start + np.asarray(r.accepted, dtype=np.int64) + 1  # exclusive
        n += int(((start < r.answer_start) & (end > r.answer_start)).sum())
    return n


def by_output_position(requests: Sequence[RequestSteps], edges: Sequence[int] = OUTPUT_EDGES, **kw) -> list[Split]:
    """One split per bucket of the step's output position."""
    _check_edges(edges, "output-position")
    return split_steps(
        requests, lambda r: np.searchsorted(edges, r.positions(), side="right"), bucket_labels(edges), **kw
    )


def by_turn(requests: Sequence[RequestSteps], **kw) -> list[Split]:
    """One split per conversation turn (`turn 1` … the last turn any request reached): later turns
    carry the verifier's own earlier answers in their prompts (and, with prefix caching, a warm
    cache for them)."""
    turns = max((r.turn for r in requests), default=0) + 1
    return split_steps(
        requests, lambda r: np.full(len(r.accepted), r.turn), [f"turn {i + 1}" for i in range(turns)], **kw
    )


def by_prompt_length(requests: Sequence[RequestSteps], edges: Sequence[int] = PROMPT_EDGES, **kw) -> list[Split]:
    """One split per bucket of the request's prompt length (prompt tokens)."""
    _check_edges(edges, "prompt-length")

    def group(r: RequestSteps) -> np.ndarray:
        if r.prompt_tokens is None:
            raise BadInput("a request has no prompt_tokens: pass each request's prompt length to from_vllm")
        return np.full(len(r.accepted), np.searchsorted(edges, r.prompt_tokens, side="right"))

    return split_steps(requests, group, bucket_labels(edges), **kw)
