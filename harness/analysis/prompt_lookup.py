"""vLLM's ngram (prompt-lookup) speculation replayed offline over outputs already known.

Prompt lookup is deterministic: at each decode step vLLM (vllm/v1/spec_decode/ngram_proposer.py)
takes the longest suffix of the context, n tokens with LOOKUP_MIN <= n <= LOOKUP_MAX, that also
occurred earlier in the context (prompt and output so far), at its earliest such occurrence, and
proposes the up-to-k tokens that followed it (fewer when the context ends sooner; nothing when no
suffix recurs). At T = 0 the verifier accepts the proposal's leading tokens that equal its own
output, so the verifier's T = 0 output alone says what ngram would have accepted, step by step,
without an engine: the first output token comes from the prefill, each later step verifies the
proposal made from the context so far and emits the accepted tokens plus one.

Pooled over requests (the harness's definitions, harness/metrics.py):
  AL              = 1 + accepted / drafts, over the steps that proposed something (vLLM's);
  tokens per step = 1 + accepted / steps, every decode step counted (what the speed follows).
At the end of an output the replay counts only the tokens the output holds; vLLM may count a
draft token past the last one as accepted (the verifier's next token, never returned).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# vLLM's prompt_lookup_min / prompt_lookup_max as the harness serves ngram (harness/engine/settings.py)
LOOKUP_MIN = 2
LOOKUP_MAX = 4


@dataclass(frozen=True)
class LookupCounts:
    """What ngram would do over a set of outputs: decode steps, steps that proposed (drafts),
    tokens proposed and tokens accepted."""

    steps: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0

    def __add__(self, o: LookupCounts) -> LookupCounts:
        return LookupCounts(
            self.steps + o.steps, self.drafts + o.drafts, self.draft_tokens + o.draft_tokens, self.accepted + o.accepted
        )

    @property
    def acceptance_length(self) -> float | None:
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def tokens_per_step(self) -> float | None:
        return 1 + self.accepted / self.steps if self.steps else None


class _Context:
    """The context so far with, per n, each n-gram's earliest start (vLLM matches the earliest)."""

    def __init__(self, lo: int, hi: int):
        self.tokens: list[int] = []
        self.first: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in range(lo, hi + 1)}

    def extend(self, new: Iterable[int]) -> None:
        for t in new:
            self.tokens.append(t)
            end = len(self.tokens)
            for n, seen in self.first.items():
                if end >= n:
                    seen.setdefault(tuple(self.tokens[end - n :]), end - n)

    def propose(self, k: int) -> list[int]:
        """The longest recurring suffix's continuation, up to k tokens (vLLM's proposal)."""
        ctx, end = self.tokens, len(self.tokens)
        for n in sorted(self.first, reverse=True):
            if end < n:
                continue
            start = self.first[n].get(tuple(ctx[end - n :]))
            if start is not None and start + n < end:  # an earlier occurrence, not the suffix itself
                return ctx[start + n : start + n + k]
        return []


def propose(context: Sequence[int], k: int, lo: int = LOOKUP_MIN, hi: int = LOOKUP_MAX) -> list[int]:
    """vLLM's ngram proposal for this context (one step; `replay` runs a whole output)."""
    c = _Context(lo, hi)
    c.extend(context)
    return c.propose(k)


def replay(
    prompt: Sequence[int], output: Sequence[int], k: int, lo: int = LOOKUP_MIN, hi: int = LOOKUP_MAX
) -> LookupCounts:
    """ngram's steps over one T = 0 output, as vLLM would take them with k draft tokens."""
    if not output:
        return LookupCounts()
    c = _Context(lo, hi)
    c.extend([*prompt, output[0]])
    steps = drafts = drafted = accepted = 0
    j = 1
    while j < len(output):
        d = c.propose(k)
        a = 0
        while a < len(d) and j + a < len(output) and d[a] == output[j + a]:
            a += 1
        steps += 1
        drafts += bool(d)
        drafted += len(d)
        accepted += a
        c.extend(output[j : j + a + 1])
        j += a + 1
    return LookupCounts(steps, drafts, drafted, accepted)


def expected(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], k: int) -> LookupCounts:
    """`replay` pooled over (prompt ids, output ids) pairs."""
    total = LookupCounts()
    for prompt, output in pairs:
        total = total + replay(prompt, output, k)
    return total
