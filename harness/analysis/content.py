"""Is a cell's content what serving sees? Two ways a benchmark measures acceptance on text no user
would get, both reported in public threads as making acceptance meaningless:

- `ignore_eos`: every request runs to max_tokens past the model's end of text. What a model writes
  after its EOS is off its distribution's usual path (repetitions, filler), and drafts accept it
  differently from real answers. The cell says so (IGNORE EOS).
- Length-limited outputs far below max_tokens: a request that finished on a length limit with
  fewer than `SHORT_FRACTION` x max_tokens tokens hit the context (engine.max_model_len: the prompt
  plus a multi-turn history), not max_tokens. Its acceptance covers less text than asked for, from
  the end of a long context. The cell says how many and where (CUT SHORT).

Pure functions over (finish reason, output tokens) per request; the bench fills the flags.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

IGNORE_EOS = "IGNORE EOS"
CUT_SHORT = "CUT SHORT"
LENGTH = "length"  # vLLM's finish reason for a length limit (max_tokens or the context)
SHORT_FRACTION = 0.5


def ignore_eos_flag(ignore_eos: bool) -> str | None:
    if not ignore_eos:
        return None
    return (
        f"{IGNORE_EOS}: every output ran to max_tokens past the model's end of text (bench.ignore_eos); "
        "acceptance there is not what serving sees"
    )


def cut_short_flag(finishes: Sequence[tuple[str | None, int]], max_tokens: int) -> str | None:
    """`finishes`: (finish reason, output tokens) per request of the arm. The flag when some
    request stopped on a length limit with fewer than SHORT_FRACTION x max_tokens tokens."""
    short = [n for reason, n in finishes if reason == LENGTH and n < SHORT_FRACTION * max_tokens]
    if not short:
        return None
    return (
        f"{CUT_SHORT}: {len(short)} of {len(finishes)} requests stopped on the context length at a median of "
        f"{statistics.median(short):g} of max_tokens={max_tokens} output tokens; raise engine.max_model_len "
        "or shorten the prompts (multi-turn histories count)"
    )
