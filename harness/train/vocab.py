"""Token frequencies of the verifier's responses -> the draft vocabulary (d2t, t2d).

The draft predicts over the `draft_vocab_size` most frequent response tokens (speculators'
`build_vocab_mappings_from_distribution`); d2t holds offsets (target = draft + d2t[draft]),
t2d a boolean mask over the verifier vocabulary. Coverage = share of response tokens inside
the draft vocabulary: an upper bound on any draft's acceptance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from harness.errors import BadInput


def token_frequencies(outputs: Iterable[Iterable[int]]) -> dict[int, int]:
    c: Counter[int] = Counter()
    for ids in outputs:
        c.update(ids)
    return dict(c)


def build_vocab(freq: dict[int, int], draft_vocab_size: int, verifier_vocab_size: int):
    """(d2t, t2d, coverage); (None, None, 1.0) when the draft keeps the full vocabulary."""
    if draft_vocab_size > verifier_vocab_size:
        raise BadInput(
            f"draft.draft_vocab_size {draft_vocab_size} exceeds the verifier's vocabulary "
            f"({verifier_vocab_size}); set it to at most {verifier_vocab_size}"
        )
    if draft_vocab_size == verifier_vocab_size:
        return None, None, 1.0
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    d2t, t2d = build_vocab_mappings_from_distribution(freq, draft_vocab_size, verifier_vocab_size)
    total = sum(freq.values())
    covered = sum(n for tid, n in freq.items() if bool(t2d[tid]))
    return d2t, t2d, (covered / total if total else 0.0)
