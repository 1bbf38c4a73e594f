"""How close is AL at k' < k, estimated from one k engine's per-step records, to separate engines?
The same k sweep twice, side by side in one process: one speculative engine per k, then
`bench.k_from_one_engine` (one engine at the largest k; harness/analysis/k_sweep.py).

    .venv/bin/python bench/k_from_one_engine.py --draft DIR [--recipe R] [--set k=v ...]

Prints, per suite and k: the separate engine's AL with its per-request 95 % CI, the one-engine
estimate (replayed, what the harness reports; truncated beside it), whether the estimate lies in
that CI, and each way's engine starts and wall time. Defaults: the Kimi stand-in, T = 0, k 1..4,
code and math, 8 prompts x 64 tokens at concurrency 4, offline engines.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULTS = [
    "bench.suites=['code','math']",
    "bench.num_prompts=8",
    "bench.max_tokens=64",
    "bench.k=[1,2,3,4]",
    "bench.concurrency=[4]",
    "bench.temperature=[0.0]",
    "bench.warmup_requests=1",
    "bench.reference_drafts=[]",
    "bench.engine='offline'",
    "bench.machine_sentinel=false",  # AL only: no speed is compared
]


def bench_once(recipe, draft: Path, run_dir: Path):
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.results.runs import read_run
    from harness.results.table import rows_to_frame
    from harness.ui import Reporter

    drafts = resolve_drafts(recipe, resolve_verifier(recipe), draft)[:1]
    t0 = time.monotonic()
    run_bench(recipe, drafts, run_dir, Reporter())
    wall = time.monotonic() - t0
    run = read_run(run_dir)
    df = rows_to_frame(run.rows)
    return df[df["mode"] == "speculative"], len(run.manifest.data["engines"]), wall


def truncated_al(run_dir: Path, cell_id: str, k: int) -> float | None:
    from harness.analysis.k_sweep import TRUNCATED, al_for_k
    from harness.bench.breakdown import request_steps
    from harness.results.table import load_cell_requests
    from harness.schema_requests import RequestRecord

    records = [RequestRecord.from_dict(r) for r in (load_cell_requests(run_dir, cell_id) or {}).get("speculative", [])]
    reqs = request_steps(records, None)
    return al_for_k(reqs, k, TRUNCATED).acceptance_length if reqs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", type=Path, default=None)
    ap.add_argument("--draft", type=Path, required=True)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--out", type=Path, default=Path("/tmp/harness-k-from-one-engine"))
    a = ap.parse_args()

    import shutil

    from harness.recipe import load_recipe

    sets = [*DEFAULTS, *a.sets]
    shutil.rmtree(a.out, ignore_errors=True)
    every, every_engines, every_wall = bench_once(load_recipe(a.recipe, sets), a.draft, a.out / "every-k")
    one_recipe = load_recipe(a.recipe, [*sets, "bench.k_from_one_engine=true"])
    one, one_engines, one_wall = bench_once(one_recipe, a.draft, a.out / "one-engine")
    kmax = max(one_recipe.bench.k)
    print(f"{'suite':12s} {'k':>2s} {'separate engine AL [95% CI]':>30s} {'one engine':>10s} {'truncated':>9s}  in CI")
    outside = 0
    for _, top in one.sort_values("suite").iterrows():
        for i, k in enumerate(range(1, kmax + 1)):
            sep = every[(every["suite"] == top["suite"]) & (every["k"] == k)].iloc[0]
            est, lo, hi = top["al_by_k"][i], sep["al_ci_low"], sep["al_ci_high"]
            inside = lo <= est <= hi
            outside += not inside
            trunc = truncated_al(a.out / "one-engine", top["cell_id"], k)
            print(
                f"{top['suite']:12s} {k:2d} {sep['acceptance_length']:12.3f} [{lo:.3f}, {hi:.3f}] {est:10.3f}"
                f" {trunc:9.3f}  {'yes' if inside else 'NO'}{'  (exact: k = k_max)' if k == kmax else ''}"
            )
    print(
        f"engines started: separate {every_engines} ({every_wall:.0f} s), one engine {one_engines} ({one_wall:.0f} s); "
        f"estimates outside the separate engine's CI: {outside}"
    )
    return 1 if outside else 0


if __name__ == "__main__":
    raise SystemExit(main())
