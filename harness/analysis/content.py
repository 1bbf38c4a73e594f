"""Is a cell's content what serving sees? Two ways a benchmark measures acceptance on text no user
would get, both reported in public threads as making acceptance meaningless:

- `ignore_eos`: every request runs to max_tokens past the model's end of text. What a model writes
  after its EOS is off its distribution's usual path (repetitions, filler), and drafts accept it
  differently from real answers. The cell says so (IGNORE EOS).
- Length-limited outputs far below max_tokens: a request that finished on a length limit with
  fewer than `SHORT_FRACTION` x max_tokens tokens hit the context (engine.max_model_len: the prompt
  plus a multi-turn history), not max_tokens. Its acceptance covers less text than asked for, from
  the end of a long context. The cell says how many and where (CUT SHORT).

- Random-token prompts (vLLM's `random` dataset, synthetic traces): token ids drawn uniformly from
  the vocabulary. No draft predicts noise and no user sends it, so a suite of them is refused
  unless asked for (bench.allow_random_prompts), and flagged when it runs (RANDOM PROMPTS). A
  prompt of at least MIN_RANDOM_TOKENS tokens looks random when both hold:
    repeats   its share of repeated tokens (1 − distinct / n) is within REPEAT_MARGIN of what
              uniform draws from a vocabulary of V give, 1 − V (1 − (1 − 1/V)^n) / n: text
              repeats its frequent tokens (" the", ",", a variable name); uniform draws from
              163,840 ids almost never do;
    spread    its ids are spread over the vocabulary like uniform draws: the Kolmogorov-Smirnov
              distance between id / V and the uniform distribution is below SPREAD_KS. BPE
              vocabularies number tokens roughly by merge order, so text sits in the low ids.
  A suite is random when at least RANDOM_SUITE_SHARE of its checkable prompts look random.
  Measured with the stand-ins' 2,048-token BPE vocabulary: the built-in suites' prompts (29-1,509
  tokens) have KS 0.39-0.48; uniform ids 0.02-0.2, and ids decoded to text and encoded again (how
  vLLM's random dataset makes its prompts) 0.10-0.20 with 0.05-0.19 more repeats than uniform.

Pure functions over (finish reason, output tokens) per request and over prompt token ids; the
bench fills the flags.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

IGNORE_EOS = "IGNORE EOS"
CUT_SHORT = "CUT SHORT"
LENGTH = "length"  # vLLM's finish reason for a length limit (max_tokens or the context)
SHORT_FRACTION = 0.5
RANDOM_PROMPTS = "RANDOM PROMPTS"
MIN_RANDOM_TOKENS = 32
REPEAT_MARGIN = 0.25
SPREAD_KS = 0.25
RANDOM_SUITE_SHARE = 0.5


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


def uniform_repeat_share(n: int, vocab_size: int) -> float:
    """The expected share of repeated tokens among n ids drawn uniformly from vocab_size."""
    distinct = vocab_size * (1 - (1 - 1 / vocab_size) ** n)
    return 1 - distinct / n


def looks_random(ids: Sequence[int], vocab_size: int) -> bool:
    """Whether a prompt's token ids look like uniform draws from the vocabulary (module docstring);
    False for prompts shorter than MIN_RANDOM_TOKENS (too short to tell)."""
    n = len(ids)
    if n < MIN_RANDOM_TOKENS or vocab_size < 2:
        return False
    repeats = 1 - len(set(ids)) / n
    if repeats > uniform_repeat_share(n, vocab_size) + REPEAT_MARGIN:
        return False
    x = np.sort(np.clip(np.asarray(ids, dtype=np.float64) / vocab_size, 0, 1))
    grid = np.arange(1, n + 1) / n
    ks = float(max(np.max(grid - x), np.max(x - (grid - 1 / n))))
    return ks < SPREAD_KS


def random_prompts(prompts: Sequence[Sequence[int]], vocab_size: int) -> tuple[int, int]:
    """(prompts that look random, prompts long enough to tell)."""
    checkable = [p for p in prompts if len(p) >= MIN_RANDOM_TOKENS]
    return sum(looks_random(p, vocab_size) for p in checkable), len(checkable)


def random_suite(prompts: Sequence[Sequence[int]], vocab_size: int) -> str | None:
    """The RANDOM PROMPTS flag when most of a suite's prompts look like random tokens, else None."""
    hits, n = random_prompts(prompts, vocab_size)
    if not n or hits < RANDOM_SUITE_SHARE * n:
        return None
    return (
        f"{RANDOM_PROMPTS}: {hits} of {n} prompts look like token ids drawn at random from the vocabulary; "
        "acceptance on them says nothing about serving"
    )
