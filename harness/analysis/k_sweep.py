"""AL at every k' <= k from one engine's per-step records (issue 25 item 6).

A Kimi-K2.5 engine takes minutes to start, and a k sweep starts one per k. At T = 0 a chain draft's
first k' proposals do not depend on k, so one k = k_max engine's per-step records
(harness/analysis/steps.py) say how each of its steps would have gone with fewer proposals.

Two estimators, both pure:

  truncated   each recorded step again, capped at k': accepted' = min(accepted, k'). The steps are
              the k_max engine's; a k' engine would also start steps inside what k_max accepted in one.
  replayed    the request's output replayed token by token with k'-steps. A k'-step starting at an
              output position inherits the match run of the k_max step that emitted that position
              (the chain assumption: the draft's proposals from inside an accepted run continue that
              run). A step that accepted all it drafted is taken to continue through its bonus token
              into the next step's run (an oracle draft then reads exactly k' + 1).

Exact: k' = k_max (both give back the recorded steps), and any draft that always or never accepts.
An estimate otherwise: a k' engine's fresh step starts from the verifier's own hidden state where the
k_max engine's chain carried the draft's, and its step boundaries fall elsewhere. Speedup is not
estimated here: it needs each k's own arm (or a cost model checked on one more k).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from harness.analysis.steps import RequestSteps, Split, split_steps
from harness.errors import BadInput

TRUNCATED, REPLAYED = "truncated", "replayed"
METHODS = (TRUNCATED, REPLAYED)


def _check(req: RequestSteps, k_prime: int) -> int:
    k = req.num_spec_tokens or max(req.drafted, default=0)
    if not 1 <= k_prime <= max(k, 1):
        raise BadInput(f"k' = {k_prime} is outside 1..{k}: one engine's steps estimate AL for k' <= its own k")
    return k


def truncated(req: RequestSteps, k_prime: int) -> RequestSteps:
    """The recorded steps, each capped at k' proposals."""
    _check(req, k_prime)
    drafted = tuple(min(d, k_prime) for d in req.drafted)
    accepted = tuple(min(a, d) for a, d in zip(req.accepted, drafted, strict=True))
    return replace(req, accepted=accepted, drafted=drafted, num_spec_tokens=k_prime)


def _runs(req: RequestSteps) -> list[int]:
    """Per step, the match run from its first proposal: its accepted count, continued through the
    bonus token into the next step's run where it accepted everything it drafted (the last step's
    into whatever follows the output, which no step that starts inside the output outruns)."""
    runs = [0] * len(req.accepted)
    after = max(req.drafted, default=0)  # past the output's end: only steps that end it reach there
    for s in range(len(req.accepted) - 1, -1, -1):
        a, d = req.accepted[s], req.drafted[s]
        runs[s] = a + 1 + after if a == d else a
        after = runs[s]
    return runs


def replayed(req: RequestSteps, k_prime: int) -> RequestSteps:
    """The request's output covered again by k'-steps (module docstring: the chain assumption)."""
    k = _check(req, k_prime)
    starts = req.positions()
    # output position -> (match run from it, proposals there was room for: fewer than k only where
    # the engine cut a draft short, e.g. at max_model_len)
    run_at: dict[int, tuple[int, int]] = {}
    for s, run in enumerate(_runs(req)):
        p, a, d = int(starts[s]), req.accepted[s], req.drafted[s]
        for j in range(a + 1):  # the accepted tokens and the bonus/correction token
            run_at[p + j] = (run - j, d - j if d < k else k)
    end = int(starts[-1]) + req.accepted[-1] + 1 if len(starts) else 0
    accepted, drafted = [], []
    q = int(starts[0]) if len(starts) else end
    while q < end:
        if q not in run_at:  # a stretch with no recorded step (k = 0 there): no step here either
            q += 1
            continue
        run, room = run_at[q]
        d = max(1, min(k_prime, room))
        a = min(run, d)
        accepted.append(a)
        drafted.append(d)
        q += a + 1
    return replace(req, accepted=tuple(accepted), drafted=tuple(drafted), num_spec_tokens=k_prime)


ESTIMATORS = {TRUNCATED: truncated, REPLAYED: replayed}


def al_for_k(requests: Sequence[RequestSteps], k_prime: int, method: str = REPLAYED, **kw) -> Split:
    """Pooled AL at k' with its per-request CI (steps.split_steps), from one engine's requests."""
    if method not in ESTIMATORS:
        raise BadInput(f"k-sweep estimator {method!r} is not one of {', '.join(METHODS)}")
    est = [ESTIMATORS[method](r, k_prime) for r in requests if r.accepted]
    return split_steps(est, lambda r: np.zeros(len(r.accepted), dtype=np.int64), [f"k={k_prime}"], k=k_prime, **kw)[0]


def is_exact(k_prime: int, k: int) -> bool:
    """Whether AL at k' from a k engine is exact for any draft (else an estimate)."""
    return k_prime == k
