"""Degenerate outputs and the explanation a cell's AL gap gets (issue 13).

Repetition of one output (token ids, the verifier's own output):
  a token is *repeated* when it lies inside an n-gram (n = 8 tokens) that also ended at an earlier
  position at most W = 1024 tokens before; only the later copy is marked, never the first.
  share = repeated tokens / output tokens, a fraction in [0, 1]; 0 for an output shorter than n.
  A loop "X X X X" of any period p <= W marks every token after its first period (3/4 here),
  so the share reads as "the part of the output that copies its own recent past" — exactly the
  part any draft (ngram lookup, EAGLE) predicts easily, which is why it inflates every AL.
  Why n = 8: a phrase that recurs in healthy text ("the value of the", "return self.") is shorter;
  eight tokens (about six words) rarely recur exactly unless the model copies itself, and a loop of
  shorter period still forms repeated 8-grams once it runs for p + 8 tokens. Why W = 1024: a
  degenerate loop can repeat whole paragraphs (periods of hundreds of tokens); the window keeps
  it to the output's recent past and bounds the look-back.
Cell level: pooled share = Σ repeated / Σ output tokens over the cell's requests (pooled like AL);
  a request *loops* when its own share >= 0.5 (more than half of it is copy);
  flag `LOOPING OUTPUTS` when the pooled share >= 0.30 — above what healthy chat, code or math
  output shows at n = 8, well below a looping model's 0.6–0.95.

Context: flag `BEYOND TRAINING CONTEXT` when at least a quarter of the cell's prompts are longer
  than the draft's training context (tokens). A quarter, because such prompts lose ~40 % of their
  AL (issue 13: 2.03 vs 3.3–3.4), and a quarter of them moves the pooled AL by ~10 %: the default
  mismatch tolerance (bench.mismatch_tolerance).

Explanation of a cell whose served AL is off the training prediction by more than the tolerance
(al_gap = (AL − predicted) / predicted, as bench/rows.py computes it), in this precedence:
  1. AL below prediction and BEYOND TRAINING CONTEXT   -> BEYOND TRAINING CONTEXT
     (context length lowers acceptance; loops only raise it, so they cannot explain a drop)
  2. AL above prediction and LOOPING OUTPUTS            -> LOOPING OUTPUTS
     (self-copying output raises acceptance; context length cannot explain a rise)
  3. otherwise                                           -> TRAIN/SERVE MISMATCH
     (no property of the workload explains the gap: look at the draft/verifier pairing)
  within tolerance -> no explanation (a loop flag is still shown: it inflates AL regardless).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import BadInput

NGRAM = 8
WINDOW = 1024
REQUEST_LOOP_SHARE = 0.5
CELL_FLAG_SHARE = 0.30
CONTEXT_MIN_SHARE = 0.25
BEYOND_CONTEXT, LOOPING, MISMATCH = "BEYOND TRAINING CONTEXT", "LOOPING OUTPUTS", "TRAIN/SERVE MISMATCH"


def repeated_tokens(tokens: Sequence[int], n: int = NGRAM, window: int = WINDOW) -> int:
    """Tokens inside a later copy of an n-gram that ended at most `window` positions earlier."""
    if n < 1 or window < 1:
        raise BadInput(f"repetition needs n >= 1 and window >= 1 (got n={n}, window={window})")
    ids = list(tokens)
    last_end: dict[tuple[int, ...], int] = {}
    marked = [False] * len(ids)
    for end in range(n - 1, len(ids)):
        gram = tuple(ids[end - n + 1 : end + 1])
        prev = last_end.get(gram)
        if prev is not None and end - prev <= window:
            marked[end - n + 1 : end + 1] = [True] * n
        last_end[gram] = end
    return sum(marked)


def repetition_share(tokens: Sequence[int], n: int = NGRAM, window: int = WINDOW) -> float:
    """Repeated tokens / output tokens (0.0 for an empty output)."""
    return repeated_tokens(tokens, n, window) / len(tokens) if len(tokens) else 0.0


@dataclass(frozen=True)
class CellRepetition:
    repeated: int  # Σ repeated tokens
    total: int  # Σ output tokens
    looping_requests: int  # requests whose own share >= REQUEST_LOOP_SHARE
    num_requests: int

    @property
    def share(self) -> float | None:
        return self.repeated / self.total if self.total else None


def cell_repetition(outputs: Sequence[Sequence[int]], n: int = NGRAM, window: int = WINDOW) -> CellRepetition:
    """Pooled repetition of a cell's outputs (one token-id list per request)."""
    counts = [(repeated_tokens(o, n, window), len(o)) for o in outputs]
    looping = sum(1 for r, t in counts if t and r / t >= REQUEST_LOOP_SHARE)
    return CellRepetition(sum(r for r, _ in counts), sum(t for _, t in counts), looping, len(counts))


def looping_flag(rep: CellRepetition, threshold: float = CELL_FLAG_SHARE) -> str | None:
    share = rep.share
    if share is None or share < threshold:
        return None
    return (
        f"{LOOPING} ({share:.0%} of output tokens repeat an {NGRAM}-gram from the previous {WINDOW} tokens; "
        f"{rep.looping_requests} of {rep.num_requests} requests loop)"
    )


def context_flag(
    prompt_lengths: Sequence[int], train_context_len: int | None, min_share: float = CONTEXT_MIN_SHARE
) -> str | None:
    """BEYOND TRAINING CONTEXT when >= min_share of the prompts are longer than the draft's
    training context; None when they fit or the training context is unknown."""
    if not train_context_len or not prompt_lengths:
        return None
    longer = sum(1 for p in prompt_lengths if p > train_context_len)
    if longer / len(prompt_lengths) < min_share:
        return None
    return f"{BEYOND_CONTEXT} (prompts up to {max(prompt_lengths)} tokens; draft trained on <= {train_context_len})"


def explain_al_gap(al_gap: float | None, tolerance: float, beyond_context: bool, looping: bool) -> str | None:
    """Which explanation a cell's AL gap gets (precedence in the module docstring); None within tolerance."""
    if al_gap is None or abs(al_gap) <= tolerance:
        return None
    if al_gap < 0 and beyond_context:
        return BEYOND_CONTEXT
    if al_gap > 0 and looping:
        return LOOPING
    return MISMATCH
