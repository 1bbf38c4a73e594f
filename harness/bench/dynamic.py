"""The dynamic-k arm (bench.dynamic_k): after a draft's fixed-k cells, the best k per concurrency
they measured (harness/analysis/load.py: highest output tok/s, k = 0 = the baseline arm) becomes
vLLM's `num_speculative_tokens_per_batch_size`, and the schedule is benched as a draft of its own,
labelled `<draft>-dynamic`, on every (suite, concurrency, temperature) of the matrix, its k column
= num_speculative_tokens = the largest fixed k (vLLM caps every scheduled k there).

One schedule per draft: output tok/s of each (k, concurrency) is the mean over the draft's
finished suites and temperatures (a server runs one schedule for all its traffic).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from harness.analysis import load
from harness.schema import DYNAMIC_SUFFIX, CellRow

SUFFIX = DYNAMIC_SUFFIX


def dynamic_label(label: str) -> str:
    return label + SUFFIX


def mean_tok_s(rows: Sequence[CellRow], draft: str) -> dict[tuple[int, int], float]:
    """{(k, concurrency): mean output tok/s} over the draft's ok cells; k = 0 from their baseline arms."""
    seen: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in rows:
        if r.draft != draft or not r.ok or r.output_tok_per_s is None:
            continue
        k = int(r.k) if r.is_speculative else 0
        seen[(k, int(r.concurrency))].append(float(r.output_tok_per_s))
    return {key: sum(v) / len(v) for key, v in seen.items()}


def derive_schedule(rows: Sequence[CellRow], draft: str) -> tuple[tuple[int, int, int], ...] | None:
    """The draft's best-k schedule from its finished fixed-k cells; None when it has none."""
    tok_s = mean_tok_s(rows, draft)
    if not any(k for k, _ in tok_s):
        return None
    return tuple(load.batch_size_schedule(load.best_k(tok_s)))
