"""Lossless at T = 0, proven or explained: locate every miss, measure the verifier's margin
there, and tell engine numerics from a speculative-decoding bug.

Definitions (all margins in nats; a difference of log-probabilities equals the difference of
the verifier's logits, so it does not depend on the softmax normalisation):

  first divergence   = the first output position where the speculative arm's token differs
      from the baseline's (or where one output ends and the other goes on); None when equal.
  margin             = logprob(baseline's token) - logprob(speculative arm's token), both read
      from the *baseline's* top-N logprobs at that position (the prefixes are identical up
      to it, so this is the verifier's own preference). When the speculative token is not in
      the baseline's top-N, its logprob is at most the N-th one's, so the margin reported is
      the lower bound logprob(baseline's token) - logprob(N-th) (`margin_is_lower_bound`).
  engine noise       = how much the same engine moves a margin when nothing but the batch
      shape changes: the baseline arm run twice (e.g. at concurrency 1 and N) on the same
      prompts; for every position where both runs share the prefix, the change of the
      top-1-minus-top-2 gap between the runs; and for every position where the two baseline
      runs diverge, the margin there (a flip of that size happened by numerics alone).
      `noise_margin` = the largest of these (a maximum over thousands of positions).

Classification of one divergence with margin m (lower bound or exact), noise n:
  NUMERICS     m <= n: the engine flips tokens this close on its own.
  SPEC BUG     m is exact-or-bounded and m >= max(NOISE_FACTOR * n, MIN_BUG_MARGIN_NATS):
      "large" means both several times the largest numeric jitter measured and a gap no
      healthy reduction-order difference produces (0.5 nats: the verifier preferred its token
      by a factor e^0.5 = 1.65 in probability). A perturbed verifier or a broken rejection
      path produces margins of nats.
  UNEXPLAINED  anything between (or a lower-bound margin that is below the noise: the real
      margin is unknown). Not proven lossless; rerun the baseline pair on more prompts.
A cell takes the worst class of its divergences (SPEC BUG > UNEXPLAINED > NUMERICS).

Gate requirements (`lossless_requirement`): "exact" = no divergence at all; "numerics-only" =
every divergence is NUMERICS; "no-spec-bug" (the gate's default) = no divergence is SPEC BUG;
"none" = not gated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

NUMERICS: Final = "NUMERICS"
SPEC_BUG: Final = "SPEC BUG"
UNEXPLAINED: Final = "UNEXPLAINED"
Verdict = Literal["NUMERICS", "SPEC BUG", "UNEXPLAINED"]
_SEVERITY = {NUMERICS: 0, UNEXPLAINED: 1, SPEC_BUG: 2}

NOISE_FACTOR = 4.0
MIN_BUG_MARGIN_NATS = 0.5

# One position's top-N logprobs as the engine returns them: token id -> logprob (the sampled
# token may be present even when it is not in the top N; see `top_n`).
TopLogprobs = Mapping[int, float]


@dataclass(frozen=True)
class Divergence:
    position: int  # 0-based index into the output tokens
    spec_token: int | None  # None: the speculative output ended here
    base_token: int | None  # None: the baseline output ended here


@dataclass(frozen=True)
class Margin:
    nats: float | None  # None: not computable (an output ended, or no logprobs there)
    is_lower_bound: bool = False


@dataclass(frozen=True)
class RequestDivergence:
    request_id: str
    divergence: Divergence
    margin: Margin
    verdict: Verdict


def first_divergence(spec_tokens: Sequence[int], base_tokens: Sequence[int]) -> Divergence | None:
    """The first position where the two outputs differ, with both tokens; None if identical."""
    for i, (s, b) in enumerate(zip(spec_tokens, base_tokens)):
        if s != b:
            return Divergence(i, int(s), int(b))
    if len(spec_tokens) == len(base_tokens):
        return None
    i = min(len(spec_tokens), len(base_tokens))
    return Divergence(
        i, int(spec_tokens[i]) if i < len(spec_tokens) else None, int(base_tokens[i]) if i < len(base_tokens) else None
    )


def top_n(logprobs: TopLogprobs, n: int) -> list[tuple[int, float]]:
    """The n most likely (token, logprob), best first (ties by token id). vLLM adds the sampled
    token to the top-N when it is not among them; taking the n best drops it again."""
    return sorted(logprobs.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def margin_at(base_logprobs: TopLogprobs | None, base_token: int | None, spec_token: int | None) -> Margin:
    """The verifier's margin of the baseline's token over the speculative arm's (see module doc)."""
    if base_logprobs is None or base_token is None or spec_token is None or base_token not in base_logprobs:
        return Margin(None)
    if spec_token in base_logprobs:
        return Margin(base_logprobs[base_token] - base_logprobs[spec_token])
    return Margin(base_logprobs[base_token] - min(base_logprobs.values()), is_lower_bound=True)


def top2_gap(logprobs: TopLogprobs) -> float | None:
    best = top_n(logprobs, 2)
    return best[0][1] - best[1][1] if len(best) == 2 else None


def noise_margin(
    run_a: Sequence[tuple[Sequence[int], Sequence[TopLogprobs]]],
    run_b: Sequence[tuple[Sequence[int], Sequence[TopLogprobs]]],
) -> float:
    """Largest margin movement between two baseline runs of the same requests (module doc).
    Each run: per request, (output token ids, per-position top-N logprobs)."""
    worst = 0.0
    for (toks_a, lps_a), (toks_b, lps_b) in zip(run_a, run_b, strict=True):
        d = first_divergence(toks_a, toks_b)
        shared = d.position if d else min(len(toks_a), len(toks_b))
        for pos in range(min(shared, len(lps_a), len(lps_b))):
            ga, gb = _same_pair_gaps(lps_a[pos], lps_b[pos])
            if ga is not None:
                assert gb is not None  # the two gaps are both None or both set
                worst = max(worst, abs(ga - gb))
        if d and d.position < len(lps_a):
            m = margin_at(lps_a[d.position], d.spec_token, d.base_token)
            if m.nats is not None:  # a lower bound still proves noise at least this large
                worst = max(worst, abs(m.nats))
    return worst


def _same_pair_gaps(a: TopLogprobs, b: TopLogprobs) -> tuple[float | None, float | None]:
    """Run A's top-1 minus top-2 gap and the gap between the same two tokens in run B."""
    best = top_n(a, 2)
    if len(best) < 2 or best[0][0] not in b or best[1][0] not in b:
        return None, None
    (t1, l1), (t2, l2) = best
    return l1 - l2, b[t1] - b[t2]


def classify(
    margin: Margin,
    noise_nats: float,
    noise_factor: float = NOISE_FACTOR,
    min_bug_margin_nats: float = MIN_BUG_MARGIN_NATS,
) -> Verdict:
    if margin.nats is None:
        return UNEXPLAINED
    m = abs(margin.nats)
    if m <= noise_nats and not margin.is_lower_bound:
        return NUMERICS
    if m >= max(noise_factor * noise_nats, min_bug_margin_nats):
        return SPEC_BUG
    return UNEXPLAINED


def request_divergence(
    request_id: str,
    spec_tokens: Sequence[int],
    base_tokens: Sequence[int],
    base_logprobs: Sequence[TopLogprobs] | None,
    noise_nats: float,
) -> RequestDivergence | None:
    """Locate, measure and classify one request's miss; None when the outputs are identical."""
    d = first_divergence(spec_tokens, base_tokens)
    if d is None:
        return None
    lps = base_logprobs[d.position] if base_logprobs and d.position < len(base_logprobs) else None
    m = margin_at(lps, d.base_token, d.spec_token)
    return RequestDivergence(request_id, d, m, classify(m, noise_nats))


@dataclass(frozen=True)
class CellLossless:
    num_compared: int
    divergences: tuple[RequestDivergence, ...]
    noise_nats: float | None  # None: no baseline pair was measured (noise taken as 0)

    @property
    def verdict(self) -> Verdict | None:
        if not self.divergences:
            return None
        return max((d.verdict for d in self.divergences), key=_SEVERITY.__getitem__)

    @property
    def first_position(self) -> int | None:
        return min((d.divergence.position for d in self.divergences), default=None)

    def columns(self) -> dict[str, Any]:
        """The cell row's lossless columns; one dict per diverging request (the JSON edge)."""
        return {
            "lossless_verdict": self.verdict,
            "lossless_first_position": self.first_position,
            "lossless_noise_nats": self.noise_nats,
            "lossless_divergences": [
                {
                    "request_id": d.request_id,
                    "position": d.divergence.position,
                    "spec_token": d.divergence.spec_token,
                    "base_token": d.divergence.base_token,
                    "margin_nats": d.margin.nats,
                    "margin_is_lower_bound": d.margin.is_lower_bound,
                    "verdict": d.verdict,
                }
                for d in self.divergences
            ],
        }

    def flag(self) -> str | None:
        """`NOT LOSSLESS: 1/8, first at token 412, margin 0.02 (NUMERICS, noise 0.05)`, or None."""
        if not self.divergences:
            return None
        ms = [abs(d.margin.nats) for d in self.divergences if d.margin.nats is not None]
        if not ms:
            where = "margin unknown (no logprobs)"
        elif len(self.divergences) == 1:
            bound = ">=" if self.divergences[0].margin.is_lower_bound else ""
            where = f"margin {bound}{ms[0]:.2g}"
        else:
            where = f"margins {min(ms):.2g}-{max(ms):.2g}"
        counts = {v: sum(d.verdict == v for d in self.divergences) for v in (SPEC_BUG, UNEXPLAINED, NUMERICS)}
        kinds = ", ".join(f"{n} {v}" for v, n in counts.items() if n) if len(self.divergences) > 1 else self.verdict
        noise = "not measured" if self.noise_nats is None else f"{self.noise_nats:.2g}"
        return (
            f"NOT LOSSLESS: {len(self.divergences)}/{self.num_compared}, first at token "
            f"{self.first_position}, {where} ({kinds}; engine noise {noise})"
        )


def same_prompt_requests(
    keys: Sequence[str], spec_outputs: Mapping[str, Sequence[int]], base_outputs: Mapping[str, Sequence[int]]
) -> tuple[list[str], int]:
    """The requests both arms sent the same prompt, and how many were left out. A later turn
    (`<id>#<t>`, t >= 1) holds the arm's own earlier answers, so it is comparable only when every
    earlier turn of its conversation came out identical in both arms: after one diverged answer the
    prompts differ, and a margin read from the baseline's context says nothing about the other's."""

    def earlier_match(key: str) -> bool:
        rid, sep, turn = key.rpartition("#")
        if not sep or not turn.isdigit():
            return True
        earlier = [f"{rid}#{t}" for t in range(int(turn))]
        return all(k in spec_outputs and k in base_outputs and spec_outputs[k] == base_outputs[k] for k in earlier)

    kept = [k for k in keys if earlier_match(k)]
    return kept, len(keys) - len(kept)


def cell_lossless(
    request_ids: Sequence[str],
    spec_outputs: Sequence[Sequence[int]],
    base_outputs: Sequence[Sequence[int]],
    base_logprobs: Sequence[Sequence[TopLogprobs] | None],
    noise_nats: float | None,
) -> CellLossless:
    """Every request of a T = 0 cell compared; `noise_nats` from `noise_margin` (None: unmeasured)."""
    found = []
    for rid, s, b, lp in zip(request_ids, spec_outputs, base_outputs, base_logprobs, strict=True):
        r = request_divergence(rid, s, b, lp, noise_nats or 0.0)
        if r is not None:
            found.append(r)
    return CellLossless(len(request_ids), tuple(found), noise_nats)


LosslessRequirement = Literal["exact", "numerics-only", "no-spec-bug", "none"]
LOSSLESS_REQUIREMENTS: tuple[str, ...] = ("exact", "numerics-only", "no-spec-bug", "none")


def verdict_meets(verdict: str | None, requirement: LosslessRequirement) -> bool:
    """Whether a cell whose worst divergence is `verdict` (None: no divergence) meets `requirement`."""
    if requirement == "none" or verdict is None:
        return True
    if requirement == "no-spec-bug":
        return verdict != SPEC_BUG
    return requirement == "numerics-only" and verdict == NUMERICS
