"""The cells a bench runs: the recipe's grid per draft, bench.extra_cells, the dynamic-k arm. One
planner for the bench itself and for the dry run's cost model (harness/plan/stages.py). Pure but for
`recipe_suite_aliases`, which reads a `#by-category` file's categories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.bench.dynamic import dynamic_label
from harness.benchfiles import expand_suite_specs
from harness.recipe import BenchSection
from harness.results.table import cell_id


@dataclass(frozen=True)
class CellSpec:
    draft: str
    suite: str
    k: int
    concurrency: int
    temperature: float
    request_rate: float = 0.0  # offered requests/s; 0: closed loop

    @property
    def id(self) -> str:
        return cell_id(self.draft, self.suite, self.k, self.concurrency, self.temperature, self.request_rate)


def suite_aliases(
    specs: Sequence[str], expanded: Sequence[Sequence[str]], names: Sequence[str], variants: int, suffixed: bool
) -> dict[str, list[str]]:
    """What an extra cell's `suite` may name, and the suites it stands for: a recipe spec (all the
    suites it expands to: one per category of `PATH#by-category`, each once per thinking and
    caching mode), one expanded spec, a suite's name before its mode suffixes (`mt-bench` for
    `mt-bench@think`, `@nothink` and `@think@nocache`), or a suite's own name. `names` are the
    suites in load order: `expanded[i]`'s parts in turn, each `variants` times (harness/suites.py
    with_thinking, with_prefix_caching); `suffixed`: the names carry mode suffixes."""
    per = max(1, variants)
    out: dict[str, list[str]] = {}
    it = iter(names)
    for spec, parts in zip(specs, expanded, strict=True):
        for part in parts:
            group = [next(it) for _ in range(per)]
            base = group[0].partition("@")[0] if suffixed else group[0]
            for key in dict.fromkeys((spec, part, base)):
                out.setdefault(key, []).extend(n for n in group if n not in out.get(key, []))
    return out | {n: [n] for n in names}


def recipe_suite_aliases(b: BenchSection, names: Sequence[str]) -> dict[str, list[str]]:
    """`suite_aliases` for the recipe's bench.suites, thinking and caching modes, `names` the suites it loads
    (in load order); expanding a `PATH#by-category` spec reads its file's categories."""
    return suite_aliases(
        b.suites,
        [expand_suite_specs([s]) for s in b.suites],
        names,
        b.suite_variants,
        bool(b.thinking or b.prefix_caching),
    )


def plan_grid(
    b: BenchSection, drafts: Sequence[str], suites: Sequence[str], aliases: dict[str, list[str]]
) -> list[CellSpec]:
    """The product suites x k x concurrency x temperature x request rate per draft (k: only the
    largest with bench.k_from_one_engine, whose cells estimate the smaller ks), then
    bench.extra_cells (closed loop, each on every suite its `suite` stands for, `aliases`), then the
    dynamic-k arm's cells."""
    cells = [
        CellSpec(d, s, k, c, t, r)
        for d in drafts
        for k in b.engine_ks
        for s in suites
        for c in b.concurrency
        for t in b.temperature
        for r in b.rates
    ]
    seen = set(cells)
    for d in drafts:
        for x in b.extra_cells:
            for s in aliases.get(x.suite, [x.suite]):
                cell = CellSpec(d, s, x.k, x.concurrency, x.temperature)
                if cell not in seen:
                    cells.append(cell)
                    seen.add(cell)
    if b.dynamic_k:  # the derived schedule, benched after the fixed ks (harness/bench/dynamic.py)
        cells += [
            CellSpec(dynamic_label(d), s, max(b.k), c, t, r)
            for d in drafts
            for s in suites
            for c in b.concurrency
            for t in b.temperature
            for r in b.rates
        ]
    return cells
