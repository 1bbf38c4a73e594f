"""What more data buys a draft: held-out accuracy and served AL against training tokens.

    .venv/bin/python bench/draft_scaling.py [RECIPE] --prompts 128,256,512 [--set k=v ...] [--out DIR]

Runs the main job once per point, the recipe as written except `train.num_prompts` (each point a
run folder of its own under --out, so a rerun resumes and an interrupted point is not lost), and
prints, per point: training prompts, samples and tokens, held-out loss, held-out full accuracy
per TTT step, the predicted AL (1 + the sum of those), and per suite the served AL (pooled,
1 + accepted / drafts) and the draft's tokens per engine step over ngram's where the recipe has
the ngram reference. Last, a least-squares line of served AL against log2(training tokens) with
its 95 % CI (scipy.stats.linregress), and the same for the draft's tokens per step over ngram's: the
tokens at which a target (an AL; 1.25x ngram by default) would be reached, read off each line, and at
the slope's lower CI end. Beyond the largest point it is an extrapolation, and says so.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _run_point(recipe: str, prompts: int, sets: list[str], out: Path) -> tuple[Path, float]:
    run_dir = out / f"prompts-{prompts}"
    cmd = [sys.executable, "-m", "harness", "train-and-bench", recipe, "--run-dir", str(run_dir)]
    for s in [*sets, f"train.num_prompts={prompts}"]:
        cmd += ["--set", s]
    t0 = time.monotonic()
    # exit 1 is a gate regression: the run is finished and its figures are what this script reads
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"draft_scaling: the main job at {prompts} prompts exited {done.returncode}; see {run_dir}")
    return run_dir, time.monotonic() - t0


def _point(run_dir: Path, prompts: int, wall_s: float) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    report = summary["train_report"]
    served = {r["suite"]: r for r in summary["rows"] if r["draft"] == "draft"}
    return {
        "prompts": prompts,
        "samples": report.get("num_train_samples"),
        "train_tokens": report.get("train_tokens"),
        "held_out_loss": report.get("held_out_loss"),
        "held_out_full_acc": report.get("held_out_full_acc") or [],
        "predicted_al": report.get("predicted_acceptance_length"),
        "al": {s: r.get("acceptance_length") for s, r in served.items()},
        "tps_over_ngram": {s: r.get("tokens_per_step_over_ngram") for s, r in served.items()},
        "wall_s": wall_s,
    }


def _mean(values: dict) -> float | None:
    vals = [v for v in values.values() if v]
    return sum(vals) / len(vals) if vals and len(vals) == len(values) else None


def _fit(points: list[dict], key: str, what: str, target: float | None) -> list[str]:
    """`key` (a per-suite dict: served AL, or tokens per step over ngram's), mean over suites, against
    log2(training tokens): slope, CI, and the tokens at which the line reaches `target`."""
    from scipy import stats

    xy = [(math.log2(p["train_tokens"]), m) for p in points if p["train_tokens"] and (m := _mean(p[key])) is not None]
    if len(xy) < 3:
        return [f"{what}: fewer than three points, no line"]
    fit = stats.linregress(*zip(*xy, strict=True))
    half = stats.t.ppf(0.975, len(xy) - 2) * fit.stderr
    lines = [
        f"{what} (mean over suites) = {fit.intercept:.3f} + {fit.slope:.3f} x log2(train tokens); "
        f"slope 95 % CI [{fit.slope - half:.3f}, {fit.slope + half:.3f}] per doubling, r^2 {fit.rvalue**2:.2f}"
    ]
    if target is None:
        return lines
    if fit.slope <= 0:
        return [*lines, f"{what} {target:.2f}: not reached on this line (it does not rise with data)"]
    tokens = 2 ** ((target - fit.intercept) / fit.slope)
    beyond = " (extrapolated beyond the largest point)" if math.log2(tokens) > max(x for x, _ in xy) else ""
    slow = fit.slope - half  # the slowest rise the CI allows: the tokens it would take then
    at_ci = f", {_tokens(2 ** ((target - fit.intercept) / slow))} at the slope's lower CI end" if slow > 0 else ""
    return [*lines, f"{what} {target:.2f} reached at ~{_tokens(tokens)} training tokens on this line{beyond}{at_ci}"]


def _tokens(n: float) -> str:
    return f"{n:,.0f}" if n < 1e10 else f"{n:.1e}"


def _print(points: list[dict]) -> None:
    suites = sorted({s for p in points for s in p["al"]})
    head = ["prompts", "samples", "train tok", "held-out loss", "held-out acc/step", "pred AL"]
    head += [f"AL {s}" for s in suites] + [f"tok/step / ngram {s}" for s in suites] + ["wall s"]
    print(" | ".join(head))
    for p in points:
        acc = " ".join(f"{a:.3f}" for a in p["held_out_full_acc"])
        cells = [p["prompts"], p["samples"], p["train_tokens"], _f(p["held_out_loss"]), acc, _f(p["predicted_al"])]
        cells += [_f(p["al"].get(s)) for s in suites] + [_f(p["tps_over_ngram"].get(s)) for s in suites]
        print(" | ".join(str(c) for c in [*cells, f"{p['wall_s']:.0f}"]))


def _f(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="train/tiny-kimi.toml")
    ap.add_argument("--prompts", default="128,256,512", help="training prompts per point, comma-separated")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="a recipe override for every point")
    ap.add_argument("--out", type=Path, default=Path("results/draft-scaling"))
    ap.add_argument("--target-al", type=float, default=None, help="report the tokens this AL takes on the fit")
    ap.add_argument(
        "--target-over-ngram",
        type=float,
        default=1.25,
        help="report the tokens at which the draft's tokens per step reach this multiple of ngram's (issue 51: 1.25)",
    )
    args = ap.parse_args()
    points = []
    for n in sorted(int(x) for x in args.prompts.split(",")):
        run_dir, wall = _run_point(args.recipe, n, args.sets, args.out)
        points.append(_point(run_dir, n, wall))
        print(f"[draft-scaling] {n} prompts done in {wall:.0f} s", file=sys.stderr)
    _print(points)
    for line in _fit(points, "al", "served AL", args.target_al):
        print(line)
    for line in _fit(points, "tps_over_ngram", "tokens per step over ngram's", args.target_over_ngram):
        print(line)
    (args.out / "draft_scaling.json").write_text(json.dumps(points, indent=2))


if __name__ == "__main__":
    main()
