"""The cost table from what a run measured: the model of harness/plan/cost.py, checked. Per stage the
work the run did, its measured wall time and throughput, the model's prediction for that same work
with the figures the plan used (a rehearsal's: the CPU defaults), and measured / predicted. Predicting
the measured work (not the plan's upper bounds) makes the ratio a check of the figures alone; the
plan's tokens are kept beside it (`planned_tokens`), a check of the work model.

It reads the run folder of the main job (harness/main_job.py):
  train/responses/timing.json  per engine session: start, generation time, output tokens
  train/agreement.json         the agreement gate's teacher-forced tokens and wall time
  train/hidden/done.json       offline: tokens extracted, wall time (the extraction server's start included)
  train/fit_result.json        training tokens, processes, wall time (online: the extraction inside it)
  manifest.json, cells/*.json  the bench's engines and their start times; each measured arm's tokens and wall
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.plan.cost import MODEL, NOT_COUNTED, StageCost, stage_costs, totals
from harness.plan.figures import by_key, default_figures, figures_from, with_recipe
from harness.plan.stages import Part, StageWork, hidden_work, serving_gpus
from harness.recipe import Recipe


@dataclass(frozen=True)
class Measured:
    """A stage's work as the run did it, its wall time, and its throughput in the figure's unit."""

    work: StageWork
    wall_s: float | None
    tok_s: float | None
    extra: dict[str, Any] | None = None


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _per_s(tokens: float, seconds: float | None) -> float | None:
    return round(tokens / seconds, 1) if seconds else None


def measured_responses(train: Path, recipe: Recipe, gpus: int) -> Measured | None:
    timing = _read(train / "responses" / "timing.json")
    if not timing or not timing["sessions"]:
        return None
    sessions = timing["sessions"]
    tokens = sum(s["output_tokens"] for s in sessions)
    gen = sum(s["wall_s"] for s in sessions)
    starts = sum(s["engine_start_s"] or 0.0 for s in sessions)
    work = StageWork(
        "responses",
        f"{len(sessions)} engine start(s); {sum(s['requests'] for s in sessions):,} requests, {tokens:,} tokens "
        f"generated ({recipe.train.response_concurrency} in flight)",
        "generate_tok_s",
        (Part(tokens, recipe.train.response_concurrency),),
        engine_starts=len(sessions),
        gpus=gpus,
    )
    return Measured(work, gen + starts, _per_s(tokens, gen))


def measured_agreement(train: Path) -> Measured | None:
    """The agreement gate's teacher-forced pass (agreement.json, runs that time it)."""
    report = _read(train / "agreement.json")
    if not report or report.get("wall_s") is None:
        return None
    tokens = report.get("forward_tokens") or 0
    work = StageWork(
        "agreement",
        f"{report['num_responses']} responses, {tokens:,} tokens teacher-forced through the transformers forward",
        "extract_tok_s",
        (Part(tokens),),
    )
    return Measured(work, report["wall_s"], _per_s(tokens, report["wall_s"]))


def measured_training(train: Path, recipe: Recipe, gpus: int) -> list[Measured]:
    """Offline: extraction and training, each timed. Online: one row, the extraction server
    running inside the training's wall time (its start, and every epoch's extraction)."""
    done, fit = _read(train / "hidden" / "done.json"), _read(train / "fit_result.json")
    online_run = done is not None and done.get("mode", "offline") == "online"  # older runs: offline, no field
    out = []
    if done and not online_run and done.get("wall_s") is not None:
        vllm = done["source"] == "vllm"
        work = replace(
            hidden_work(recipe, done["num_tokens"], gpus, "offline"),
            engine_starts=int(vllm),
            gpus=gpus if vllm else 0,
        )
        start = done.get("engine_start_s") or 0.0
        out.append(Measured(work, done["wall_s"], _per_s(done["num_tokens"], done["wall_s"] - start)))
    if fit and fit.get("wall_s") is not None:
        procs = fit.get("world_size") or 1
        work = StageWork(
            "training",
            f"{fit['train_tokens']:,} tokens trained ({recipe.train.epochs} epochs), {procs} process(es)",
            "train_tok_s",
            (Part(fit["train_tokens"]),),
            gpus=procs if gpus else 0,
            processes=procs,
        )
        per_proc = _per_s(fit["train_tokens"], fit["wall_s"] * procs)
        online = hidden_work(recipe, done["num_tokens"], gpus, "online") if done and online_run else None
        out.append(Measured(work, fit["wall_s"], None if online else per_proc, {"online": online}))
    return out


def measured_bench(run_dir: Path, recipe: Recipe, gpus: int) -> Measured | None:
    """Engine starts and measured arms: a baseline arm counts in the cell that measured it (a
    shared one is copied into the cells that reuse it). Warm-up and sentinels are in neither side."""
    from harness.results.manifest import read_manifest_data
    from harness.results.table import read_rows

    rows = read_rows(run_dir)
    if not rows:
        return None
    engines = (read_manifest_data(run_dir, missing_ok=True).get("engines") or {}).values()
    starts = [e["startup_s"] for e in engines if e.get("startup_s") is not None]
    arms = [r for r in rows if r.is_speculative or r.baseline_cell in (None, r.cell_id)]
    by_c: dict[int, int] = {}
    for r in arms:
        by_c[r.concurrency] = by_c.get(r.concurrency, 0) + r.num_output_tokens
    wall = sum(r.wall_s for r in arms)
    tokens = sum(by_c.values())
    work = StageWork(
        "bench",
        f"{len(starts)} engine starts; {len(arms)} measured arms, {tokens:,} output tokens "
        "(warm-up and machine sentinels not counted on either side)",
        "generate_tok_s",
        tuple(Part(t, c) for c, t in sorted(by_c.items())),
        engine_starts=len(starts),
        gpus=2 * gpus,
    )
    return Measured(work, wall + sum(starts), _per_s(tokens, wall))


def _merge(a: StageCost, b: StageCost, stage: str) -> StageCost:
    """Two stages sharing one wall clock (online: extraction inside training): their times add."""
    wall = None if a.wall_s is None or b.wall_s is None else a.wall_s + b.wall_s
    gpu_h = None if a.gpu_h is None or b.gpu_h is None else a.gpu_h + b.gpu_h
    return StageCost(
        stage,
        f"{a.work}; {b.work}",
        a.engine_starts + b.engine_starts,
        a.tokens + b.tokens,
        f"{a.figure}; {b.figure}",
        wall,
        max(a.gpus, b.gpus),
        gpu_h,
        "the extraction server runs inside the training's wall time",
        a.parts + b.parts,
    )


def _compare(m: Measured, figures, planned: dict[str, tuple[int, float | None]]) -> dict[str, Any]:
    [cost] = stage_costs([m.work], figures)
    online = (m.extra or {}).get("online")
    if online is not None:
        [extract] = stage_costs([online], figures)
        cost = _merge(extract, cost, "hidden states + training (online)")
    d = cost.to_dict()
    ratio = m.wall_s / cost.wall_s if m.wall_s is not None and cost.wall_s else None
    d["measured"] = {
        "wall_s": m.wall_s,
        "tok_s": m.tok_s,
        "ratio": None if ratio is None else round(ratio, 2),
        "planned_tokens": _planned(cost.stage, planned, 0),
        # the dry run's own hours for the stage (its upper-bound work): what a user plans with
        "planned_wall_s": _planned(cost.stage, planned, 1),
    }
    return d


def _planned(stage: str, planned: dict[str, tuple[int, float | None]], field: int) -> Any:
    """The plan's tokens (field 0) or wall seconds (1) for a measured stage: the plan's stages it covers,
    by first word ("hidden states (online)" and "training" for the online row)."""
    covered = [v[field] for name, v in planned.items() if name.split(" ")[0] in stage]
    if not covered or any(c is None for c in covered):
        return None
    total = sum(c for c in covered if c is not None)
    return round(total, 1) if field else total


def measured_costs(run_dir: Path, recipe: Recipe, planned: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cost table of a finished (or partly finished) main-job run folder. `planned`: the dry
    run's cost section for the same recipe; its figures predict (else the recipe's, over the
    device defaults), and its tokens are kept beside the measured ones."""
    e = recipe.engine
    gpus = serving_gpus(e)
    figures = figures_from(planned) if planned else with_recipe(recipe.cost, default_figures(e.device))
    train = run_dir / "train"
    rows = [
        measured_responses(train, recipe, gpus),
        measured_agreement(train),
        *measured_training(train, recipe, gpus),
        measured_bench(run_dir, recipe, gpus),
    ]
    plan = {s["stage"]: (s["tokens"], s["wall_s"]) for s in (planned or {}).get("stages", [])}
    stages = [_compare(m, by_key(figures), plan) for m in rows if m is not None]
    predicted = [StageCost(s["stage"], "", 0, 0, "", s["wall_s"], 0, None) for s in stages]
    measured_wall = sum(s["measured"]["wall_s"] or 0.0 for s in stages)
    return {
        "model": MODEL,
        "stages": stages,
        "total": {**totals(predicted), "measured_wall_s": round(measured_wall, 1)},
        "planned_wall_s": {name: v[1] for name, v in plan.items()},  # the dry run's stages, measured or not
        "assumptions": [f.to_dict() for f in figures],
        "not_counted": NOT_COUNTED,
    }


def planned_vs_measured(cost: dict[str, Any]) -> str:
    """One line: per stage the dry run's planned seconds, the measured seconds and measured / planned;
    a planned stage the run did not time reads "—" measured."""
    parts, measured = [], [s["stage"] for s in cost["stages"]]
    for s in cost["stages"]:
        m = s["measured"]
        plan, wall = m.get("planned_wall_s"), m["wall_s"]
        ratio = f" ({wall / plan:.2f}x)" if plan and wall is not None else ""
        parts.append(f"{s['stage']} {_secs(plan)} / {_secs(wall)}{ratio}")
    for name, plan in (cost.get("planned_wall_s") or {}).items():
        if not any(name.split(" ")[0] in stage for stage in measured):
            parts.append(f"{name} {_secs(plan)} / {_secs(None)}")
    return "planned / measured: " + " · ".join(parts)


def _secs(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f} s"
