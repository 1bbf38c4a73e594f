"""Speculative-decoding counters out of vLLM's two metric surfaces (pure parsing).

Server: Prometheus text from `/metrics` (`vllm:spec_decode_num_drafts_total`, …,
`vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`), summed over engines/labels.
Offline: the `Metric` objects of `LLM.get_metrics()` (`vllm:spec_decode_num_drafts`, …, and the
vector `vllm:spec_decode_num_accepted_tokens_per_pos`).

Per request, `SpecSummary`: vLLM's speculative-decoding summary of one finished request, from
either surface (server: the response's `metrics.speculative_decoding` JSON; offline: the
`RequestSpecDecodeMetrics` on `CompletionOutput.spec_decode_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_PREFIX = "vllm:spec_decode_"
_SCALARS = {
    "num_drafts": "num_drafts",
    "num_draft_tokens": "num_draft_tokens",
    "num_accepted_tokens": "num_accepted_tokens",
}
GENERATION_TOKENS = "vllm:generation_tokens"
# The other totals (counters()[1]) an engine reports, under short names, from these vLLM counters
GENERATION, PREFIX_CACHE_QUERIES, PREFIX_CACHE_HITS = "generation_tokens", "prefix_cache_queries", "prefix_cache_hits"
_TOTALS = {
    GENERATION_TOKENS: GENERATION,
    "vllm:prefix_cache_queries": PREFIX_CACHE_QUERIES,  # prompt tokens looked up in the prefix cache
    "vllm:prefix_cache_hits": PREFIX_CACHE_HITS,  # of those, tokens found cached
}


# The engine produces these counters, so their type lives here (as vLLM keeps its
# SpecDecodingStats beside the scheduler); the metric math in harness/metrics.py reads them.
@dataclass(frozen=True)
class SpecCounters:
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = field(default_factory=tuple)

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        return self._combine(before, -1)

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return self._combine(other, 1)

    def _combine(self, other: SpecCounters, sign: int) -> SpecCounters:
        n = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        a = self.accepted_per_pos + (0,) * (n - len(self.accepted_per_pos))
        b = other.accepted_per_pos + (0,) * (n - len(other.accepted_per_pos))
        return SpecCounters(
            self.num_drafts + sign * other.num_drafts,
            self.num_draft_tokens + sign * other.num_draft_tokens,
            self.num_accepted_tokens + sign * other.num_accepted_tokens,
            tuple(x + sign * y for x, y in zip(a, b, strict=True)),
        )


@dataclass(frozen=True)
class SpecSummary:
    """vLLM's per-request speculative-decoding summary (`RequestSpecDecodeMetrics.to_dict()`), the
    fields the harness reads. A field vLLM left out is None (the per-step arrays: empty; vLLM
    sends them only at per_request_spec_decode_metrics='detailed')."""

    num_spec_steps: int | None = None  # verify steps (vLLM: sum of the acceptance histogram)
    num_accepted_draft_tokens: int | None = None  # draft tokens accepted over all steps (no bonus)
    num_draft_tokens: int | None = None  # draft tokens proposed over all steps
    num_spec_tokens: int | None = None  # k the engine ran with
    per_step_accepted: tuple[int, ...] = ()  # accepted at each verify step, in step order
    per_step_drafted: tuple[int, ...] = ()  # proposed at each verify step

    @classmethod
    def from_vllm(cls, metrics: Mapping[str, Any] | Any | None) -> SpecSummary | None:
        """From the server's JSON (a mapping) or the offline `RequestSpecDecodeMetrics` (read
        through its `to_dict()`); None when vLLM gave none (an engine without speculation)."""
        if metrics is None:
            return None
        d = metrics if isinstance(metrics, Mapping) else metrics.to_dict()

        def num(name: str) -> int | None:
            v = d.get(name)
            return None if v is None else int(v)

        return cls(
            num("num_spec_steps"),
            num("num_accepted_draft_tokens"),
            num("num_draft_tokens"),
            num("num_spec_tokens"),
            tuple(int(a) for a in d.get("per_step_accepted") or ()),
            tuple(int(x) for x in d.get("per_step_drafted") or ()),
        )


def counters_from_prometheus(text: str) -> tuple[SpecCounters, dict[str, float]]:
    """(spec counters, other totals such as generation tokens) from /metrics text."""
    from prometheus_client.parser import text_string_to_metric_families

    scalars = dict.fromkeys(_SCALARS.values(), 0)
    per_pos: dict[int, int] = {}
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name[: -len("_total")] if s.name.endswith("_total") else s.name
            if s.name.endswith("_created"):
                continue
            if name in _TOTALS:
                totals[_TOTALS[name]] = totals.get(_TOTALS[name], 0) + s.value
            if not name.startswith(_PREFIX):
                continue
            short = name[len(_PREFIX) :]
            if short in _SCALARS:
                scalars[_SCALARS[short]] += int(s.value)
            elif short == "num_accepted_tokens_per_pos":
                pos = int(s.labels.get("position", 0))
                per_pos[pos] = per_pos.get(pos, 0) + int(s.value)
    accepted = tuple(per_pos.get(i, 0) for i in range(max(per_pos) + 1)) if per_pos else ()
    return SpecCounters(
        scalars["num_drafts"], scalars["num_draft_tokens"], scalars["num_accepted_tokens"], accepted
    ), totals


def counters_from_offline(metrics: list[Any]) -> tuple[SpecCounters, dict[str, float]]:
    """The same from `LLM.get_metrics()` (Counter has .value, Vector has .values)."""
    scalars = dict.fromkeys(_SCALARS.values(), 0)
    accepted: tuple[int, ...] = ()
    totals: dict[str, float] = {}
    for m in metrics:
        name = m.name
        if name in _TOTALS:
            totals[_TOTALS[name]] = totals.get(_TOTALS[name], 0) + float(getattr(m, "value", 0) or 0)
        if not name.startswith(_PREFIX):
            continue
        short = name[len(_PREFIX) :]
        if short in _SCALARS:
            scalars[_SCALARS[short]] += int(getattr(m, "value", 0) or 0)
        elif short == "num_accepted_tokens_per_pos":
            vals = [int(v) for v in (getattr(m, "values", None) or [])]
            n = max(len(vals), len(accepted))
            accepted = tuple(
                (accepted[i] if i < len(accepted) else 0) + (vals[i] if i < len(vals) else 0) for i in range(n)
            )
    return SpecCounters(
        scalars["num_drafts"], scalars["num_draft_tokens"], scalars["num_accepted_tokens"], accepted
    ), totals
