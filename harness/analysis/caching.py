"""Does prefix caching change acceptance? A cell run with prefix caching on and its `@nocache` twin
(the same prompts, every request with a fresh cache salt: bench.prefix_caching) compared turn by
turn on the speculative arm.

Per turn index t, over the conversations that reached turn t in both cells (request ids
`<conversation>#<t>`, every repeat):

  AL_on(t), AL_off(t)   pooled: 1 + Σ accepted / Σ drafts over those requests' verify steps
  diff(t)               AL_on(t) − AL_off(t)
  CI                    paired bootstrap: conversations resampled with replacement, the same draw
                        for both cells (a conversation's turns and repeats stay together)

A turn's difference is flagged (CACHE CHANGES ACCEPTANCE) when its CI excludes 0. At T = 0 a
lossless engine gives the same tokens with the cache as without, so the difference is exactly 0;
a flag means cached prompt blocks (the verifier's or the draft's KV) made the engine propose or
verify differently, the mechanism behind reports of acceptance decaying with caching on.

Pure functions over per-request records (the fields of harness/bench/breakdown.py RequestRecord).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CACHE_CHANGES = "CACHE CHANGES ACCEPTANCE"


@dataclass(frozen=True)
class TurnDiff:
    turn: int  # 0-based turn index
    conversations: int  # paired conversations
    al_on: float
    al_off: float
    ci: tuple[float, float] | None  # of al_on - al_off; None with < 2 conversations

    @property
    def diff(self) -> float:
        return self.al_on - self.al_off

    @property
    def changed(self) -> bool:
        return self.ci is not None and (self.ci[0] > 0 or self.ci[1] < 0)


def _per_conversation(records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, tuple[int, int]]]:
    """turn -> conversation -> (accepted, drafts) summed over the conversation's repeats."""
    out: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in records:
        accepted = r.get("accepted") or ()
        if not accepted:
            continue
        conv, _, turn = str(r["request_id"]).rpartition("#")
        sums = out[int(turn) if turn.isdigit() and conv else 0][conv or str(r["request_id"])]
        sums[0] += int(sum(accepted))
        sums[1] += len(accepted)  # one recorded step = one draft
    return {t: {c: (a, d) for c, (a, d) in convs.items()} for t, convs in out.items()}


def turn_diffs(
    on: Sequence[Mapping[str, Any]],
    off: Sequence[Mapping[str, Any]],
    level: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> list[TurnDiff]:
    """Per turn index both cells reached, AL with and without prefix caching and the paired CI of
    the difference. `on`/`off`: the speculative arm's request records of the two cells."""
    a, b = _per_conversation(on), _per_conversation(off)
    rng = np.random.default_rng(seed)
    out = []
    for t in sorted(set(a) & set(b)):
        convs = sorted(c for c in set(a[t]) & set(b[t]) if a[t][c][1] and b[t][c][1])
        if not convs:
            continue
        x = np.asarray([a[t][c] for c in convs], dtype=np.float64)  # (accepted, drafts) with caching
        y = np.asarray([b[t][c] for c in convs], dtype=np.float64)
        al_on = 1 + x[:, 0].sum() / x[:, 1].sum()
        al_off = 1 + y[:, 0].sum() / y[:, 1].sum()
        ci = None
        if len(convs) >= 2:
            idx = rng.integers(0, len(convs), size=(num_resamples, len(convs)))
            diffs = x[idx, 0].sum(1) / x[idx, 1].sum(1) - y[idx, 0].sum(1) / y[idx, 1].sum(1)
            alpha = (1 - level) / 2 * 100
            ci = (float(np.percentile(diffs, alpha)), float(np.percentile(diffs, 100 - alpha)))
        out.append(TurnDiff(t, len(convs), float(al_on), float(al_off), ci))
    return out


def cache_flag(diffs: Sequence[TurnDiff]) -> str | None:
    """The flag when some turn's AL differs with and without prefix caching beyond its CI."""
    changed = [d for d in diffs if d.changed]
    if not changed:
        return None
    parts = [
        f"turn {d.turn + 1} AL {d.al_on:.2f} with prefix caching, {d.al_off:.2f} without "
        f"(difference {d.diff:+.2f}, 95% CI [{d.ci[0]:+.2f}, {d.ci[1]:+.2f}])"
        for d in changed
        if d.ci is not None
    ]
    return f"{CACHE_CHANGES}: " + "; ".join(parts)
