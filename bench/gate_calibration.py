"""How often does the paired gate (harness/results/gate/paired.py) raise a false alarm, and how often
does it catch a planted drop? Replays recorded per-request data from real bench runs (issue 52).

    .venv/bin/python bench/gate_calibration.py RUN [RUN ...] [--draws 1000] [--prompts 8,40,160]
        [--tolerance 0.05] [--round 8] [--draft draft] [--baseline-draft baseline_draft]

For each run and each cell of the candidate draft (`--draft`), the request pool is the cell's recorded
requests paired by request id with the baseline draft's cell at the same setting in the same run
(`--baseline-draft`; absent: the candidate with itself, an A/A with no noise at all). Each draw takes
n requests from the pool with replacement and gates them:

  - a true relative AL difference of 0 (A/A), −tolerance and −2 × tolerance, planted by binomial
    thinning of per-request accepted counts (total and per position), the way a weaker draft loses
    accepted tokens: the candidate is thinned with keep = ((1 − d) · AL_base − 1) / (AL_cand − 1)
    when the recorded pair differs by less than d, else the baseline draft is thinned so that the
    candidate sits d below it. With a baseline draft that is the same folder as the candidate (the
    same draft run twice in one run) this is the plain A/A + planted drop; with a real weaker draft
    as the candidate (an earlier checkpoint against the final one) every scenario keeps the two
    drafts' real per-request heterogeneity, which is what the paired test has to see through.

Printed per scenario and prompt count: the share of draws that pass / are inconclusive / fail with
the fixed design (the 90 % paired interval over all n prompts), the sequential design's verdict (the
group-sequential test with Pocock-type error spending over a budget of n, looked at every --round
prompts: the same verdict as the fixed design, its error rates, mean prompts used), the detectable drop
at 80 % power (median over draws) and the prompts it would take to see the tolerance; and the real
runs, cells and requests behind it.

Matched power (the last block): where the right verdict is known (no drop: pass; 2 × the tolerance:
fail), the fewest prompts with which the fixed design reaches the sequential design's share of that
verdict (its replays on a grid of every 4 prompts), against the sequential design's mean prompts: the
requests the sequential rule saves at the same error rates.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.results.gate import paired as P  # noqa: E402
from harness.results.gate.paired_run import request_counts, twins  # noqa: E402
from harness.results.runs import read_run  # noqa: E402

Pair = tuple[P.RequestCounts, P.RequestCounts]


@dataclass
class Pool:
    run: str
    cell: str
    pairs: list[Pair]
    twin: bool  # a baseline draft's cell (else the candidate with itself)

    @property
    def al(self) -> float:
        return 1 + sum(c.accepted for c, _ in self.pairs) / sum(c.drafts for c, _ in self.pairs)

    @property
    def base_al(self) -> float:
        return 1 + sum(b.accepted for _, b in self.pairs) / sum(b.drafts for _, b in self.pairs)

    def keeps(self, drop: float) -> tuple[float, float]:
        """Thinning of (candidate, baseline) that makes the pooled candidate AL (1 − drop) × the baseline's:
        the candidate thinned when the recorded pair is closer than that, else the baseline (so the
        recorded per-request heterogeneity between the two drafts stays in every scenario)."""
        c, b, r = self.al, self.base_al, 1 - drop
        if r <= c / b:
            return (r * b - 1) / (c - 1), 1.0
        return 1.0, (c / r - 1) / (b - 1)

    def can_drop(self, drop: float) -> bool:
        """Whether thinning can plant `drop`: a negative keep would ask for an AL below 1, no draft's
        (SmolLM2's code cell, AL 1.10, cannot lose 10 %)."""
        return min(self.keeps(drop)) >= 0


def pools_of(run_dir: str, draft: str, baseline_draft: str) -> list[Pool]:
    run = read_run(run_dir)
    out = []
    for r, twin in twins(run, draft, baseline_draft):
        cand = request_counts(run, r)
        pairs = P.paired(cand, request_counts(run, twin) if twin is not None else cand)
        if len(pairs) >= P.MIN_PAIRS:
            out.append(Pool(run.label, f"{r.suite}/k{r.k}/c{r.concurrency}", pairs, twin is not None))
    return out


def _draw(pool: Pool, n: int, drop: float, rng: np.random.Generator) -> list[Pair]:
    kc, kb = pool.keeps(drop)
    out = []
    for j, i in enumerate(rng.integers(0, len(pool.pairs), n)):
        c, b = pool.pairs[i]
        c = P.RequestCounts(f"{j}", c.drafts, c.accepted, c.per_pos)
        b = P.RequestCounts(f"{j}", b.drafts, b.accepted, b.per_pos)
        out.append((c.scaled(kc, rng) if kc < 1 else c, b.scaled(kb, rng) if kb < 1 else b))
    return out


@dataclass
class Tally:
    fixed: Counter
    seq: Counter
    agree: int
    seq_prompts: list[int]
    mdd: list[float]
    need: list[int]


def draws(pools: list[Pool], n: int, drop: float, args, rng: np.random.Generator) -> Iterator[list[Pair]]:
    """args.draws draws of n pairs, each from a cell drawn at random among those that can take the drop."""
    pools = [p for p in pools if p.can_drop(drop)]
    for _ in range(args.draws if pools else 0):
        yield _draw(pools[int(rng.integers(0, len(pools)))], n, drop, rng)


def replay(pools: list[Pool], n: int, drop: float, args, rng: np.random.Generator) -> Tally:
    t = Tally(Counter(), Counter(), 0, [], [], [])
    for pairs in draws(pools, n, drop, args, rng):
        est = P.paired_estimate(pairs, -1, args.tolerance)
        if est is None:
            continue
        seq = P.sequential_verdict(pairs, args.tolerance, args.round, n)
        t.fixed[est.verdict] += 1
        t.seq[seq.verdict] += 1
        t.agree += seq.verdict == est.verdict
        t.seq_prompts.append(seq.n_used)
        t.mdd.append(est.mdd)
        t.need.append(est.prompts_needed or n)
    return t


def fixed_prompts_for(pools: list[Pool], share: float, verdict: str, drop: float, budget: int, args, rng) -> int | None:
    """The fewest prompts (every 4, up to twice the budget) at which the fixed design reaches `verdict` in
    at least `share` of the draws; None beyond that."""
    for n in range(4, 2 * budget + 1, 4):
        ests = [e for pairs in draws(pools, n, drop, args, rng) if (e := P.paired_estimate(pairs, -1, args.tolerance))]
        if ests and sum(e.verdict == verdict for e in ests) / len(ests) >= share:
            return n
    return None


def print_matched(pools: list[Pool], args, tallies: dict[tuple[int, float], Tally]) -> None:
    tol = args.tolerance
    print("matched power: the fixed design's prompts for the sequential design's share of the right verdict")
    for (n, drop), t in tallies.items():
        verdict = {0.0: "pass", 2 * tol: "fail"}.get(drop)
        draws = sum(t.seq.values())
        if verdict is None or not draws:
            continue
        share = t.seq[verdict] / draws
        rng = np.random.default_rng(args.seed + 1)
        fixed = fixed_prompts_for(pools, share, verdict, drop, n, args, rng)
        used = float(np.mean(t.seq_prompts))
        what = "no drop (A/A)" if drop == 0 else f"drop {drop * 100:g}% (2x)"
        said = (
            f"fixed needs {fixed}: sequential uses {used / fixed:.0%} of it"
            if fixed
            else f"fixed needs more than {2 * n}"
        )
        print(f"  {what:<16} budget {n:>4}: sequential {verdict} {share:6.1%} on {used:5.1f} prompts; {said}")


def _share(c: Counter, k: str) -> str:
    total = sum(c.values())
    return f"{c[k] / total:6.1%}" if total else "     -"


def print_table(pools: list[Pool], args) -> dict[tuple[int, float], Tally]:
    rng = np.random.default_rng(args.seed)
    tallies: dict[tuple[int, float], Tally] = {}
    tol = args.tolerance
    scenarios = [
        ("no drop (A/A)", 0.0),
        (f"drop {tol * 100:g}% (the tolerance)", tol),
        (f"drop {2 * tol * 100:g}% (2x)", 2 * tol),
    ]
    head = (
        f"{'scenario':<26} {'n':>4}  {'pass':>6} {'incon.':>6} {'fail':>6}  |  seq: {'pass':>6} {'incon.':>6} "
        f"{'fail':>6} {'same':>6} {'prompts':>7}  |  {'MDD':>6} {'need':>5}"
    )
    print(head)
    print("-" * len(head))
    for n in [int(x) for x in args.prompts.split(",")]:
        for name, drop in scenarios:
            t = tallies[(n, drop)] = replay(pools, n, drop, args, rng)
            draws = sum(t.fixed.values())
            if not draws:
                print(f"{name:<26} {n:>4}  no cell's AL can drop that far and stay at or above 1")
                continue
            short = sum(not p.can_drop(drop) for p in pools)
            print(
                f"{name:<26} {n:>4}  {_share(t.fixed, 'pass')} {_share(t.fixed, 'inconclusive')} "
                f"{_share(t.fixed, 'fail')}  |       {_share(t.seq, 'pass')} {_share(t.seq, 'inconclusive')} "
                f"{_share(t.seq, 'fail')} {t.agree / max(draws, 1):6.1%} {np.mean(t.seq_prompts):7.1f}  |  "
                f"{np.median(t.mdd):6.1%} {int(np.median(t.need)):>5}"
                + (f"  ({short} of {len(pools)} cells left out: AL below 1 after the drop)" if short else "")
            )
        print()
    return tallies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--prompts", default="8,40,160", help="comma-separated prompt counts per draw")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--round", type=int, default=8, help="prompts per round of the sequential design")
    ap.add_argument("--draft", default="draft")
    ap.add_argument("--baseline-draft", default="baseline_draft")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pools = [p for r in args.runs for p in pools_of(r, args.draft, args.baseline_draft)]
    if not pools:
        sys.exit(f"no cell of draft {args.draft!r} with per-request records in {', '.join(args.runs)}")
    for p in pools:
        _, base_al, diff, u = P.relative_difference(P.metric_arrays(p.pairs, -1), 1.0)
        sd = float(np.std(u, ddof=1))
        twin = "paired with the baseline draft's cell" if p.twin else "no baseline draft: paired with itself"
        need = int(np.ceil((2.49 * sd / args.tolerance) ** 2))  # z_0.95 + z_0.8 = 2.49
        print(
            f"{p.run} {p.cell}: {len(p.pairs)} recorded requests, AL {p.al:.3f} vs {base_al:.3f} ({diff:+.1%}), "
            f"paired SD of the relative difference {sd:.4f}: detectable drop with 40 prompts "
            f"{2.49 * sd / np.sqrt(40):.1%}, prompts for {args.tolerance:.1%}: {need} "
            f"({twin})"
        )
    print(
        f"\n{len({p.run for p in pools})} real runs, {len(pools)} cells behind the replay; {args.draws} replayed draws "
        f"per line (a cell drawn at random, then n of its requests with replacement); tolerance {args.tolerance:.1%}; "
        f"fixed design: 90 % paired interval (t, skew-corrected); sequential: group-sequential, Pocock-type error "
        f"spending over the budget, a look every {args.round} prompts from {P.MIN_SEQUENTIAL_LOOK}\n"
    )
    print_matched(pools, args, print_table(pools, args))


if __name__ == "__main__":
    main()
