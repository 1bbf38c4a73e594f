"""Do speedup CIs hold on a rerun? The same bench N times back to back, each its own `harness bench`
process (its own engine starts), then every cell's speedups compared run to run (issue 52).

    .venv/bin/python bench/speedup_reruns.py [RECIPE] --draft DIR [--reruns 10] [--name aa] [--set k=v ...]
        [--record]
    .venv/bin/python bench/speedup_reruns.py --runs RUN [RUN ...] [--record]   # analyse finished runs

Printed per cell: each run's speedup with its own 95 % CI, the within-run standard error of
ln speedup (from the CI) and the between-run SD measured over the runs (harness/analysis/between_runs.py).
Then, over consecutive pairs of runs (1-2, 2-3, ...), the share of cells whose two speedups lie within
1.96 × their combined standard error, or where either run flagged the cell `MACHINE NOISE`:
  - with each run's own CI (what a single run reports without a machine record);
  - with CIs widened by the between-run SD estimated from the OTHER runs (leave the pair out: the
    pair never calibrates its own check).
`--record` stores the between-run SD of all the runs as this machine's (harness/bench/machine_record.py):
every later bench on this machine widens its speedup CIs by it and says so.
Runs whose rows were already widened by an earlier record are read back to their own CIs first.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.analysis.between_runs import Speedup, agree, between_run_sd, rerun_z, widened  # noqa: E402
from harness.analysis.machine import DRIFT_CEILING, DRIFT_FLOOR, noise_flag, quiet_drift  # noqa: E402
from harness.results.runs import Run, read_run  # noqa: E402

Cell = tuple[str, str, int, int, float, float]


def read_cells(runs: list[Run]) -> list[dict[Cell, tuple[Speedup, Speedup, bool]]]:
    """Per run: each speculative cell's (the CI its run reported, the CI
    over its requests alone, flagged MACHINE NOISE) (harness/bench/machine_record.py)."""
    from harness.bench.machine_record import request_ci, run_own_ci

    out = []
    for run in runs:
        cells = {}
        for r in run.rows:
            if r.is_speculative and r.speedup is not None and r.status == "ok":
                key = (r.draft, r.suite, r.k, r.concurrency, r.temperature, r.request_rate or 0.0)
                cells[key] = (run_own_ci(r), request_ci(r), noise_flag(r.flags) is not None)
        out.append(cells)
    return out


def quiet_drifts(runs: list[Run]) -> list[float]:
    """The sentinel drift of every speculative cell of the runs that no other process took CPU
    from (harness/analysis/machine.py): the machine's own jitter."""
    from harness.analysis.machine import FOREIGN_CPU_LIMIT

    return [
        r.machine_drift
        for run in runs
        for r in run.rows
        if r.is_speculative and r.machine_drift is not None and (r.machine_foreign_cpu or 0.0) <= FOREIGN_CPU_LIMIT
    ]


def _name(c: Cell) -> str:
    return f"{c[0]}/{c[1]} k={c[2]} c={c[3]} T={c[4]:g}" + (f" @{c[5]:g}/s" if c[5] else "")


def analyse(runs: list[dict[Cell, tuple[Speedup, Speedup, bool]]]) -> dict:
    """The per-cell table and the pair checks (module docstring); returns the figures printed."""
    cells = sorted(set().union(*runs))
    by_cell = {c: [r[c][1] for r in runs if c in r] for c in cells}  # request CIs: what tau is estimated against
    shown = {c: [r[c][0] for r in runs if c in r] for c in cells}
    tau_all = between_run_sd(by_cell)
    print(f"{len(runs)} runs, {len(cells)} cells")
    print(f"{'cell':34s} within-run SE and between-run SD over the requests' CIs; speedups with each run's reported CI")
    for c in cells:
        reps = by_cell[c]
        one = between_run_sd({c: reps})
        se = sum(s.log_se for s in reps) / len(reps)
        print(
            f"  {_name(c):32s} within-run SE {se:6.1%}  between-run SD {one.tau if one else float('nan'):6.1%}  "
            + " ".join(f"{s.value:.2f}[{s.low or s.value:.2f},{s.high or s.value:.2f}]" for s in shown[c])
        )
    if tau_all:
        print(f"between-run SD of ln speedup, all cells: {tau_all.tau:.1%} ({tau_all.cells} cells, {len(runs)} runs)")
    own = {"agree": 0, "flagged": 0, "miss": 0}
    wide = {"agree": 0, "flagged": 0, "miss": 0}
    zs = []
    for i in range(len(runs) - 1):
        a, b = runs[i], runs[i + 1]
        others = [r for j, r in enumerate(runs) if j not in (i, i + 1)]
        tau = between_run_sd({c: [r[c][1] for r in others if c in r] for c in cells})
        t = tau.tau if tau else 0.0
        for c in set(a) & set(b):
            (sa, _, fa), (sb, _, fb) = a[c], b[c]
            z = rerun_z(sa, sb)
            zs.append(z)
            for tally, x, y in ((own, sa, sb), (wide, widened(sa, t), widened(sb, t))):
                tally["agree" if agree(x, y) else "flagged" if (fa or fb) else "miss"] += 1
    figures = {"runs": len(runs), "cells": len(cells), "tau": tau_all.tau if tau_all else None}
    for label, tally in (("each run's own CI", own), ("CIs widened by the other runs' between-run SD", wide)):
        n = sum(tally.values())
        ok = tally["agree"] + tally["flagged"]
        print(
            f"pairs of consecutive runs x cells: {n}; within 1.96 x combined SE or flagged, {label}: "
            f"{ok}/{n} = {ok / n:.0%} (agree {tally['agree']}, flagged {tally['flagged']}, missed {tally['miss']})"
        )
        figures[label] = ok / n if n else None
    return figures


def run_reruns(recipe: str, draft: str, reruns: int, name: str, sets: list[str]) -> list[str]:
    harness = str(Path(sys.executable).parent / "harness")
    dirs = []
    for i in range(1, reruns + 1):
        run_id = f"reruns-{name}-{i:02d}"
        cmd = [harness, "bench", recipe, "--draft", draft, "--run-id", run_id]
        for s in sets:
            cmd += ["--set", s]
        print(f"[{datetime.now(UTC):%H:%M:%S}] rerun {i}/{reruns}: {' '.join(cmd)}", flush=True)
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            sys.exit(f"rerun {i} failed (exit {done.returncode}); its run folder is results/runs/{run_id}")
        dirs.append(f"results/runs/{run_id}")
    return dirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe", nargs="?", default="train/tiny-kimi.toml")
    ap.add_argument("--draft")
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--name", default="aa")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--runs", nargs="+", help="analyse these finished runs instead of running new ones")
    ap.add_argument("--record", action="store_true", help="store the between-run SD as this machine's")
    a = ap.parse_args()
    if a.runs:
        dirs = a.runs
    elif a.draft:
        dirs = run_reruns(a.recipe, a.draft, a.reruns, a.name, a.set)
    else:
        sys.exit("give --draft DIR (to run the reruns) or --runs RUN ... (to analyse finished ones)")
    if len(dirs) < 3:
        sys.exit("need at least 3 runs (each pair's check is calibrated on the others)")
    read = [read_run(d) for d in dirs]
    runs = read_cells(read)
    figures = analyse(runs)
    drifts = quiet_drifts(read)
    quiet = quiet_drift(drifts)
    if drifts:
        print(
            f"sentinel drift across a cell's arms, {len(drifts)} cells with no other process taking CPU: median "
            f"{statistics.median(drifts):.0%}, over {DRIFT_FLOOR:.0%} (the tolerance's floor) in "
            f"{sum(d > DRIFT_FLOOR for d in drifts)}, over {DRIFT_CEILING:.0%} (its ceiling) in "
            f"{sum(d > DRIFT_CEILING for d in drifts)}; 95th percentile "
            + ("n/a (fewer than 20 cells)" if quiet is None else f"{quiet:.0%}")
        )
    if a.record and figures["tau"] is not None:
        from harness.bench.machine_record import MachineRecord, record_path, write_record

        recipe = (read[0].manifest.data.get("recipe") or {}).get("name") or a.recipe
        rec = MachineRecord(
            figures["tau"], len(runs), figures["cells"], recipe, datetime.now(UTC).isoformat(), tuple(dirs), quiet
        )
        write_record(rec)
        print(f"recorded as this machine's between-run SD: {rec.tau:.1%} ({rec.source}) in {record_path()}")
        if quiet is not None:
            print(f"and as its sentinel quiet drift, the floor of every cell's drift tolerance: {quiet:.0%}")


if __name__ == "__main__":
    main()
