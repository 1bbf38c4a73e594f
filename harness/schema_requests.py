"""A cell's side file (cells/requests/<cell>.json, harness/schema.py's REQUESTS_DIR): one
`RequestRecord` per finished request of an arm, written by harness/bench/ and read back by the SLO
timings (harness/analysis/slo.py, harness/results/slo_view.py) and the per-step breakdowns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One finished request of an arm (cells/requests/<cell>.json holds them by arm): what the
    per-step breakdowns, the repetition measure and the SLO timings need. accepted/drafted are
    vLLM's per-step arrays (`per_request_spec_decode_metrics="detailed"`); empty for the baseline,
    and when the server only gives the summary (`steps` is then False)."""

    request_id: str
    repeat: int
    prompt_tokens: int
    output_token_ids: tuple[int, ...]
    latency_s: float | None = None
    accepted: tuple[int, ...] = ()
    drafted: tuple[int, ...] = ()
    num_spec_tokens: int | None = None
    steps: bool = False
    finish_reason: str | None = None  # vLLM's ("stop", "length"); None in side files of older runs
    ttft_s: float | None = None  # time to first token; None in side files of older runs
    sent_s: float | None = None  # sent (open loop: scheduled arrival), from its batch's first (server engines)
    queue_s: float | None = None  # open loop: waited for a slot under the concurrency cap (counted in ttft/latency)

    def to_dict(self) -> dict[str, Any]:
        """The fields as they are (no deep copy: a production arm holds ~10^5 tokens per request)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RequestRecord:
        """A record read back from a cell's side file (cells/requests/, JSON lists for tuples)."""
        return cls(**{**d, "output_token_ids": tuple(d["output_token_ids"])})
