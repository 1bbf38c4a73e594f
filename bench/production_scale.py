"""The harness's own cost at Kimi-K2.5's production size: no engine runs; synthetic records of the
production bench's shape go through the harness's real bookkeeping and results code.

    .venv/bin/python bench/production_scale.py [--cells 256] [--prompts 80] [--tokens 2048] [--repeats 3]

Default shape (train/kimi-k2.5.toml's bench, thinking modes folded): 4 suites x k 1..8 x
concurrency {1, 8, 32, 64} x T {0, 1} = 256 cells; 80 prompts x 2,048 output tokens x 3 repeats per
arm; vLLM's detailed per-step records (AL ~3); output ids over the real 163,840-token vocabulary;
at T = 1 the distribution test's re-scored positions (3 numbers each, the in-engine reduction's
shape). The baseline arm is shared per (suite, concurrency, T), as bench.shared_baseline has it.

Stages: per cell in this process, timed apart and without the synthetic records' own making, the
cell's analysis (cell_rows: breakdowns, repetition, speedup CI, lossless and T > 0 tests) and its
bookkeeping (write_cell: the cell and its per-request side file; the bench writes nothing else per
cell); the tables once at the end; then report, compare (the run vs itself) and gate (baseline
update, then the gate), each through the CLI as a user runs it, timed with its peak RSS. Prints the
last cell's bookkeeping against the median cell's (issue 55: within 10 %) and the run folder's size.

The goal it checks (issue 25): bookkeeping under 1 % of the engine time such a run takes (stated
below, with its assumption), and report + compare + gate within 60 s and 2 GiB.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

VOCAB = 163_840
SUITES = ("mt-bench", "gsm8k", "humaneval", "math500")
KS = tuple(range(1, 9))
CONCURRENCY = (1, 8, 32, 64)
TEMPERATURES = (0.0, 1.0)
# Engine time the stated 1 % is of: per arm, 80 prompts x 2,048 tokens at ASSUMED_TOK_S output
# tokens/s, every cell alike. train/kimi-k2.5.toml's [cost] example has one TP8 instance at 845
# tok/s with 32 requests in flight, and a c = 1 cell decodes far slower; 2,000 tok/s is faster than
# either, so the engine time is understated and the harness's share overstated.
ASSUMED_TOK_S = 2_000.0


def _grid(cells: int) -> list[tuple[str, int, int, float]]:
    full = list(itertools.product(SUITES, KS, CONCURRENCY, TEMPERATURES))
    return full[:cells]


def _steps(rng: np.random.Generator, k: int, tokens: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per-step accepted counts (geometric, acceptance 0.7 per position, capped at k) until the output is covered."""
    draws = np.minimum(rng.geometric(0.3, size=tokens) - 1, k)
    ends = np.cumsum(draws + 1)
    n = int(np.searchsorted(ends, tokens - 1)) + 1
    return tuple(int(a) for a in draws[:n]), (k,) * n


def _arm(rng, outputs, k, repeats, wall, speculative: bool):
    from harness.bench.breakdown import RepeatRecord
    from harness.bench.rows import ArmResult
    from harness.engine.counters import SpecCounters
    from harness.schema_requests import RequestRecord

    arm = ArmResult()
    for rep in range(repeats):
        ids = []
        for p, out in enumerate(outputs):
            rid = f"p{p}#0"
            acc, dr = _steps(rng, k, len(out)) if speculative else ((), ())
            arm.requests.append(RequestRecord(rid, rep, 600, out, wall / 2, acc, dr, k if speculative else None, True))
            arm.outputs.setdefault(rid, list(out))
            arm.ttft.append(50.0)
            arm.tpot.append(20.0)
            arm.itl += [20.0] * (len(acc) or len(out) - 1)
            if speculative:
                arm.per_request.append((sum(acc), len(acc)))
                arm.per_request_al.append(1 + sum(acc) / len(acc))
                arm.counters = arm.counters + SpecCounters(
                    len(acc), sum(dr), sum(acc), tuple(sum(a > j for a in acc) for j in range(k))
                )
            ids.append(rid)
        toks = sum(len(o) for o in outputs)
        arm.repeats.append(
            RepeatRecord(toks, wall, tuple(ids), tuple(len(o) for o in outputs), (wall / 2,) * len(outputs))
        )
        arm.tok_s_repeats.append(toks / wall)
        arm.wall_s += wall
        arm.num_output_tokens += toks
        arm.num_requests += len(outputs)
    return arm


def _samples(rng, outputs):
    """The T > 0 test's re-scored positions: each sampled token with its probability and the mass
    below it (3 numbers per position), for the first repeat's outputs."""
    from harness.analysis.lossless_sampling import SampledToken

    out = []
    for o in outputs:
        u = rng.random(len(o))
        out += [
            SampledToken(int(t), {int(t): float(np.log(0.3)), -1: float(np.log(max(x, 1e-9)))}) for t, x in zip(o, u)
        ]
    return out


# The child reports its own peak (VmHWM: this process's memory high-water mark). Its ru_maxrss
# would not do: Linux carries the parent's peak over fork and exec into it.
_PEAK = """
import atexit, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(
    next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]))
sys.argv = ["harness", *sys.argv[2:]]
runpy.run_module("harness", run_name="__main__")
"""


def _cli(name: str, table: list, out: Path, *args: str) -> None:
    """One results command as a user runs it (a child process): its wall time and peak RSS."""
    peak = out / "peak_kib"
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", _PEAK, str(peak), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # 1: the gate's verdict on synthetic cells, not a failure of the command
        raise SystemExit(f"{' '.join(args)} exited {p.returncode}: {p.stderr.decode()[-2000:]}")
    table.append((name, wall, int(peak.read_text()) / 1024**2))  # KiB -> GiB


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=80)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/harness-production-scale"))
    a = ap.parse_args()

    from harness.bench.rows import CellIdentity, cell_rows
    from harness.provenance import atomic_write_json
    from harness.results.table import cell_id, ensure_tables, write_cell

    shutil.rmtree(a.out, ignore_errors=True)
    run_dir = a.out / "run"
    grid = _grid(a.cells)
    ids = [cell_id("draft", s, k, c, t) for s, k, c, t in grid]
    atomic_write_json(
        run_dir / "manifest.json",
        {
            "run_id": "scale",
            "status": "complete",
            "started_at": "2026-12-02T00:00:00+00:00",
            "ended_at": "2026-12-02T20:00:00+00:00",
            "planned_cells": ids,
            "recipe": {"name": "kimi-k2.5 (synthetic scale)"},
            "provenance": {"git_sha": "scale", "packages": {}, "hardware": {"device": "cuda"}},
            "verifier": {"/models/kimi": {"path": "/models/kimi", "content_hash": "vh"}},
            "drafts": {"draft": {"path": "/drafts/d", "method": "eagle3", "content_hash": {"sha256": "dh"}}},
        },
    )
    rng = np.random.default_rng(0)
    table: list[tuple[str, float, float]] = []
    wall_arm = a.prompts * a.tokens / ASSUMED_TOK_S
    shared: dict[tuple[str, int, float], tuple] = {}
    per_cell: list[float] = []  # each cell's bookkeeping: its side file and cell file written
    analysis: list[float] = []  # each cell's derived columns (cell_rows), by cell
    for (suite, k, c, t), cid in zip(grid, ids):
        key = (suite, c, t)
        if key not in shared:
            outputs = [tuple(int(x) for x in rng.integers(0, VOCAB, a.tokens)) for _ in range(a.prompts)]
            shared[key] = (outputs, _arm(rng, outputs, 1, a.repeats, wall_arm, False))
        outputs, base = shared[key]
        spec = _arm(rng, outputs, k, a.repeats, wall_arm / 1.8, True)
        ident = CellIdentity(run_id="scale", cell_id=cid, draft="draft", method="eagle3", suite=suite,
                             suite_version="1", suite_sha="sha", k=k, concurrency=c, temperature=t, top_p=1.0,
                             max_tokens=a.tokens, repeats=a.repeats, engine="server",
                             rejection_sample_method="greedy" if t == 0 else "standard", verifier_hash="vh",
                             draft_hash="dh")  # fmt: skip
        samples = (_samples(rng, outputs), _samples(rng, outputs)) if t > 0 else None
        t0 = time.perf_counter()  # the harness's part from here: the synthetic records are the engine's
        rows = cell_rows(
            ident, base, spec, predicted_al=3.0, deterministic_verifier=True, mismatch_tolerance=0.1,
            train_context_len=4096, num_top_logprobs=2, sampling_samples=samples,
        )  # fmt: skip
        t1 = time.perf_counter()  # the cell's analysis done; its bookkeeping from here (record_cell's part)
        requests = {
            "baseline": [r.to_dict() for r in base.requests],
            "speculative": [r.to_dict() for r in spec.requests],
        }
        write_cell(run_dir, cid, rows, requests)
        per_cell.append(time.perf_counter() - t1)
        analysis.append(t1 - t0)
    t0 = time.perf_counter()
    ensure_tables(run_dir)  # results.parquet / results.csv once, when the run ends (as run_bench does)
    tables_s = time.perf_counter() - t0
    book = sum(analysis) + sum(per_cell) + tables_s
    table.append((f"cell analysis, {len(grid)} cells (cell_rows)", sum(analysis), _rss_gib()))
    table.append((f"bookkeeping, {len(grid)} cells (write_cell)", sum(per_cell), _rss_gib()))
    table.append(("tables, once at the end (parquet + CSV + hashes)", tables_s, _rss_gib()))
    folder = _size(run_dir)
    base_dir, cmp_md = str(a.out / "baseline"), str(a.out / "compare.md")
    _cli("report (tables, plots, Markdown, HTML)", table, a.out, "report", str(run_dir))
    _cli("compare (run vs itself, Markdown)", table, a.out, "compare", str(run_dir), str(run_dir), "--markdown", cmp_md)
    _cli("gate --update-baseline", table, a.out, "gate", str(run_dir), "--baseline", base_dir, "--update-baseline")
    _cli("gate", table, a.out, "gate", str(run_dir), "--baseline", base_dir)

    engine_s = len(grid) * a.repeats * wall_arm / 1.8 + len(shared) * a.repeats * wall_arm
    print(f"{'stage':55s} {'wall s':>8s} {'peak RSS GiB':>12s}")
    for name, wall, rss in table:
        print(f"{name:55s} {wall:8.1f} {rss:12.2f}")
    results_s = sum(w for _, w, _ in table[3:])
    results_gib = max(r for _, _, r in table[3:])
    median, last = float(np.median(per_cell)), per_cell[-1]
    print(
        f"bookkeeping per cell (writing the cell and its side file; the manifest is written per engine and "
        f"the tables once): median {median:.3f} s, last {last:.3f} s ({last / median - 1:+.0%}: a cell's writes "
        f"do not grow with the cells before it, goal within 10 %); cell analysis (cell_rows) per cell: median "
        f"{float(np.median(analysis)):.2f} s, last {analysis[-1]:.2f} s; "
        f"run folder {folder / 1024**3:.2f} GiB\n"
        f"engine time assumed: {engine_s / 3600:.1f} h ({ASSUMED_TOK_S:,.0f} output tok/s per arm, speculative "
        f"arms 1.8x faster); the harness's own time (cell analysis, bookkeeping, tables) {book:.0f} s = "
        f"{book / engine_s:.2%} of it (goal < 1 %)\n"
        f"report + compare + gate: {results_s:.0f} s, peak RSS {results_gib:.2f} GiB (goal <= 60 s, <= 2 GiB)"
    )
    return 0 if book / engine_s < 0.01 and results_s <= 60 and results_gib <= 2 else 1


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


if __name__ == "__main__":
    raise SystemExit(main())
