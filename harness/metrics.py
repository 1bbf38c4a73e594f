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

import statistics
from collections.abc import Sequence

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
    """numpy's linear-interpolated percentile (q in [0, 100]); None for no values."""
    return float(np.percentile(values, q)) if len(values) else None


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


def _pooled_al(accepted: np.ndarray, drafts: np.ndarray, axis: int = -1) -> np.ndarray:
    """1 + Σ accepted / Σ drafts along `axis`: the pooled AL of each resample (scipy passes a batch)."""
    return 1.0 + accepted.sum(axis=axis) / drafts.sum(axis=axis)


def bootstrap_ci(
    per_request_accepted: Sequence[int],
    per_request_drafts: Sequence[int],
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Confidence interval of the pooled AL by resampling requests (a request is the unit of
    independence: its drafts are correlated): scipy.stats.bootstrap's percentile interval, a
    request's (accepted, drafts) resampled together, from a numpy generator seeded with `seed`.
    Returns (low, high) or None with < 2 requests that drafted."""
    from scipy.stats import bootstrap  # imported here: scipy.stats takes about a second

    pairs = [(a, d) for a, d in zip(per_request_accepted, per_request_drafts, strict=True) if d > 0]
    if len(pairs) < 2:
        return None
    acc_d = np.asarray(pairs, dtype=np.float64)
    res = bootstrap(
        (acc_d[:, 0], acc_d[:, 1]),
        _pooled_al,
        paired=True,
        vectorized=True,
        n_resamples=num_resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
