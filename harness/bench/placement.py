"""Which node measures which cells when the bench spreads over several nodes ([cluster] nodes).

Cells are placed by their baseline key (suite, concurrency, temperature, request rate): every cell that
shares a baseline arm runs on the node that measures that arm, so each pair stays measured on one
machine, in one engine order. Each node starts every engine configuration its cells need (the same
ABA order as one node) over its share; the shares are balanced by their decode time (longest first,
each to the least-loaded node). Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from harness.bench.grid import CellSpec
from harness.recipe import BenchSection

BaselineKey = tuple[str, int, float, float]


def baseline_key(cell: CellSpec) -> BaselineKey:
    return (cell.suite, cell.concurrency, cell.temperature, cell.request_rate)


def place(cells: Sequence[CellSpec], nodes: int, weight: Callable[[CellSpec], float]) -> dict[CellSpec, int]:
    """The node (0 .. nodes - 1) of every cell: whole baseline groups, balanced by the cells' summed weight."""
    groups: dict[BaselineKey, list[CellSpec]] = defaultdict(list)
    for c in cells:
        groups[baseline_key(c)].append(c)
    load = [0.0] * nodes
    out: dict[CellSpec, int] = {}
    for _, members in sorted(groups.items(), key=lambda kv: (-sum(map(weight, kv[1])), kv[0])):
        node = min(range(nodes), key=lambda i: (load[i], i))
        load[node] += sum(map(weight, members))
        out.update(dict.fromkeys(members, node))
    return out


def decode_weight(prompts: Callable[[CellSpec], int], in_flight_cap: int | None) -> Callable[[CellSpec], float]:
    """A cell's decode time up to a constant: its prompts over the requests decoding at once (up to the
    engine's throughput knee `in_flight_cap`, beyond which more in flight adds no throughput)."""

    def weight(cell: CellSpec) -> float:
        at_once = min(cell.concurrency, in_flight_cap) if in_flight_cap else cell.concurrency
        return prompts(cell) / max(at_once, 1)

    return weight


def bench_weight(b: BenchSection, requests: Mapping[str, int]) -> Callable[[CellSpec], float]:
    """The weight the dry run prices and `harness bench --shard` places by (they must agree): a cell's
    requests per suite (turns counted, bench.max_prompts_by_concurrency applied), no in-flight cap."""
    return decode_weight(lambda c: b.prompts_at(c.concurrency, requests[c.suite]), None)
