"""The dynamic-k arm's engine (bench.dynamic_k): after a draft's fixed-k cells, its best-k
schedule (harness/bench/dynamic.py, derived from their rows) started as an engine of its own
beside the verifier's baseline engine, and measured on every dynamic cell."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from harness.bench.arm import warm_up
from harness.bench.cell import measure_cell, record_cell
from harness.bench.dynamic import derive_schedule, dynamic_label
from harness.bench.grid import CellSpec
from harness.bench.manifest import record_engine, update_manifest
from harness.bench.planning import Prompts
from harness.bench.run_state import BenchRun
from harness.draft.under_test import DraftUnderTest
from harness.engine.base import Engine
from harness.engine.settings import SpeculativeSpec, engine_plan
from harness.results.manifest import read_manifest_data
from harness.verifier.layout import VerifierLayout


@dataclass(frozen=True)
class VerifierShared:
    """What every speculative engine of one verifier shares (bench_verifier): the baseline engine,
    the verifier's tokenizer and every suite's rendered prompts, by suite name."""

    base_engine: Engine
    tokenizer: Any
    prompts: dict[str, Prompts]


def bench_dynamic(
    run: BenchRun, layout: VerifierLayout, draft: DraftUnderTest, cells: list[CellSpec], shared: VerifierShared
) -> None:
    """The draft's best-k schedule, derived from its finished fixed-k cells, as an engine of its own."""
    prompts = shared.prompts
    schedule = derive_schedule(run.rows, draft.label)
    if schedule is None:
        run.reporter.log(f"[{draft.label}] dynamic k: no finished fixed-k cell to derive a schedule from; skipped")
        return
    b = run.recipe.bench
    known = read_manifest_data(run.run_dir, missing_ok=True).get("dynamic_k") or {}
    update_manifest(run.run_dir, dynamic_k={**known, dynamic_label(draft.label): [list(r) for r in schedule]})
    spec = SpeculativeSpec(draft.method, max(b.k), draft.path, b.rejection_sample_method, k_schedule=schedule)
    dyn = replace(draft, label=dynamic_label(draft.label), held_out_full_acc=())  # k varies: no prediction
    with run.make_engine(engine_plan(run.recipe.engine, layout, spec), dyn.label) as spec_engine:
        record_engine(run.run_dir, dyn.label, spec_engine)
        warm_up(spec_engine, next(iter(prompts.values())), run.recipe, layout)
        for cell in cells:
            measured = measure_cell(
                run, cell, dyn, (shared.base_engine, spec_engine), shared.tokenizer, prompts[cell.suite]
            )
            measured.rows[1].k_schedule = json.dumps([list(r) for r in schedule])
            record_cell(run, cell, measured)
