"""Metric definitions and the pure math behind every number the harness reports.

Counters come from vLLM (offline `LLM.get_metrics()` or the server's `/metrics`); they are
cumulative, so every cell is a *delta*: snapshot before, snapshot after, subtract.

  num_drafts            verify steps that carried draft tokens          (vllm:spec_decode_num_drafts)
  num_draft_tokens      draft tokens proposed                           (…num_draft_tokens)
  num_accepted_tokens   draft tokens accepted                           (…num_accepted_tokens)
  accepted_per_pos[i]   drafts whose token at position i was accepted   (…num_accepted_tokens_per_pos)

Derived, pooled over all drafts of a cell (vLLM's convention; never an average of ratios):

  acceptance_length (AL, τ) = 1 + num_accepted_tokens / num_drafts
      tokens emitted per verify step, *including* the verifier's bonus token; 1 … k+1.
  draft_acceptance_rate     = num_accepted_tokens / num_draft_tokens = (AL − 1) / k; a fraction.
  per_position_rate[i]      = accepted_per_pos[i] / num_drafts
      unconditional (position i accepted, which implies 0…i−1 were); non-increasing in i.
  verify_steps              = max(num_drafts, output tokens − generations − num_accepted_tokens)
      every decode step of the cell, drafted or not: each emits 1 + its accepted draft tokens, and
      a generation's first token comes from its prefill.
  tokens_per_step           = (output tokens − generations) / verify_steps
      AL over *every* decode step. vLLM counts a draft only on steps that proposed one, so a method
      that drafts on some steps only (ngram, suffix: where they find a match) reads a high AL over
      few steps; this is what its verifier forwards yield. Equal to AL for a draft that proposes on
      every step (EAGLE-3, P-EAGLE, DFlash, draft_model) up to a generation's truncated last step.
  speedup                   = spec output_tok_per_s / baseline output_tok_per_s, the two measured
      on the same prompts, max tokens, sampling, concurrency and parallelism.
  output_tok_per_s          = output tokens of all requests / wall time of the measured batch.
  lossless_match_rate       = requests whose speculative output tokens equal the baseline's
      / requests compared (T = 0 only; near-ties can flip a token, so it is measured, not assumed).
  per-request AL            = vLLM's per-request summary (`spec_decode_metrics`), same formula
      per request; its mean differs from the pooled AL (SpecForge reports the former, vLLM the
      latter) and is used for the bootstrap confidence interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from typing import cast

import numpy as np

from harness.engine.counters import SpecCounters


def acceptance_length(c: SpecCounters) -> float | None:
    """1 + accepted / drafts (includes the bonus token); None when there were no drafts."""
    return 1.0 + c.num_accepted_tokens / c.num_drafts if c.num_drafts else None


def verify_steps(num_output_tokens: int, num_generations: int, c: SpecCounters) -> int | None:
    """Decode steps over a cell's generations, drafted or not; None without decoded tokens."""
    decoded = num_output_tokens - num_generations
    return max(c.num_drafts, decoded - c.num_accepted_tokens) if decoded > 0 else None


def tokens_per_step(num_output_tokens: int, num_generations: int, c: SpecCounters) -> float | None:
    """Decoded tokens per decode step, undrafted steps included (1 for no speculation)."""
    steps = verify_steps(num_output_tokens, num_generations, c)
    return (num_output_tokens - num_generations) / steps if steps else None


def draft_acceptance_rate(c: SpecCounters) -> float | None:
    """accepted / draft tokens, a fraction in [0, 1]; None when nothing was drafted."""
    return c.num_accepted_tokens / c.num_draft_tokens if c.num_draft_tokens else None


def per_position_rates(c: SpecCounters) -> tuple[float, ...]:
    """accepted_per_pos[i] / drafts (unconditional); empty when there were no drafts."""
    if not c.num_drafts:
        return ()
    return tuple(x / c.num_drafts for x in c.accepted_per_pos)


def output_tok_per_s(num_output_tokens: int, wall_s: float) -> float | None:
    return num_output_tokens / wall_s if wall_s > 0 else None


def speedup(spec_tok_per_s: float | None, base_tok_per_s: float | None) -> float | None:
    if not spec_tok_per_s or not base_tok_per_s:
        return None
    return spec_tok_per_s / base_tok_per_s


def lossless_match(spec_outputs: Sequence[Sequence[int]], base_outputs: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(requests whose token ids are identical, requests compared)."""
    pairs = list(zip(spec_outputs, base_outputs, strict=True))
    return sum(list(a) == list(b) for a, b in pairs), len(pairs)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def per_token_itl(gaps: Sequence[float], tokens: Sequence[int]) -> list[float]:
    """Inter-token latency per token: each streamed chunk's gap spread over the tokens it carried.
    Under speculation a verify step delivers up to k+1 tokens in one chunk, so the per-chunk gaps
    (itl_ms_* columns, vLLM's benchmark convention) overstate the wait per token; these average to
    TPOT. Empty when the chunk sizes are unknown (a length mismatch)."""
    if len(gaps) != len(tokens):
        return []
    return [g / n for g, n in zip(gaps, tokens, strict=True) if n > 0 for _ in range(n)]


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def hit_rate(queried: float, hits: float) -> float | None:
    """The prefix cache's hit rate: prompt tokens found cached / prompt tokens looked up."""
    return hits / queried if queried > 0 else None


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def randrange_draws(seed: int, n: int, count: int) -> np.ndarray:
    """The first `count` values of `random.Random(seed).randrange(n)`, called repeatedly, drawn in
    one go: numpy's MT19937 given the same state gives the same 32-bit words, and randrange keeps
    the top n.bit_length() bits of each and skips those >= n (CPython's _randbelow_with_getrandbits)."""
    words = random.Random(seed).getstate()[1]
    gen = np.random.MT19937()
    gen.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(words[:624], dtype=np.uint32), "pos": words[624]},
    }
    shift = np.uint64(32 - n.bit_length())
    out: list[np.ndarray] = []
    have = 0
    while have < count:  # each word is kept with probability > 1/2
        kept = gen.random_raw(2 * (count - have) + 64) >> shift
        kept = kept[kept < n]
        out.append(kept)
        have += len(kept)
    return np.concatenate(out)[:count].astype(np.int64)


def bootstrap_ci(
    per_request_accepted: Sequence[int],
    per_request_drafts: Sequence[int],
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Confidence interval of the pooled AL by resampling requests (a request is the unit of
    independence: its drafts are correlated). Returns (low, high) or None with < 2 requests."""
    pairs = [(a, d) for a, d in zip(per_request_accepted, per_request_drafts, strict=True) if d > 0]
    if len(pairs) < 2:
        return None
    # Not scipy.stats.bootstrap(paired=True): the al_ci_low/high in committed baselines
    # (results/baselines/) come from a seeded random.Random's resampling, which scipy's numpy
    # generator would not repeat. `randrange_draws` draws those same indices, vectorized.
    idx = randrange_draws(seed, len(pairs), num_resamples * len(pairs)).reshape(num_resamples, len(pairs))
    acc_d = np.asarray(pairs, dtype=np.int64)
    stats = (1.0 + acc_d[:, 0][idx].sum(axis=1) / acc_d[:, 1][idx].sum(axis=1)).tolist()
    alpha = (1 - level) / 2 * 100
    # stats holds num_resamples values, so neither percentile is None
    return cast(float, percentile(stats, alpha)), cast(float, percentile(stats, 100 - alpha))
