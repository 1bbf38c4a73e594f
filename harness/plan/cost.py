"""What a plan costs: each stage's work (engine starts, tokens) turned into wall time and GPU-hours
by throughput figures — the recipe's [cost] table, else the device's defaults, each saying where it
comes from (cited, derived from cited figures, an assumption, or measured).

  seconds   = engine starts x engine_start_s + sum over the stage's parts of tokens / rate
  rate      = the stage's figure x processes working at once (training); for generation also
              x min(1, requests in flight / generate_concurrency)
  GPU-hours = hours x GPUs held while the stage runs (none on a CPU)

Stages run one after another, so their hours add. Pure: the dry run feeds it the plan's numbers
(harness/plan/dry_run.py), the rehearsal what its run folder measured (harness/plan/cost_measured.py),
and both print the same table (harness/plan/cost_render.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.plan.cpu_figures import decode_rate
from harness.plan.figures import Figure, by_key, figure_value
from harness.plan.stages import (
    Part,
    PlanNumbers,
    StageWork,
    agreement_work,
    bench_count,
    bench_work,
    hidden_work,
    responses_work,
    training_work,
)
from harness.recipe import Recipe

HOUR = 3600.0


@dataclass(frozen=True)
class StageCost:
    stage: str
    work: str
    engine_starts: int
    tokens: int
    figure: str  # the figures used, with their values
    wall_s: float | None  # None: a figure is missing
    gpus: int
    gpu_h: float | None  # None on a CPU, or without wall_s
    note: str = ""
    parts: tuple[dict[str, Any], ...] = ()  # per part: tokens, in_flight, tok_s, wall_s

    @property
    def wall_h(self) -> float | None:
        return None if self.wall_s is None else self.wall_s / HOUR

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["wall_h"] = None if self.wall_h is None else round(self.wall_h, 3)
        d["wall_s"] = None if self.wall_s is None else round(self.wall_s, 1)
        d["gpu_h"] = None if self.gpu_h is None else round(self.gpu_h, 2)
        return d


def part_rate(work: StageWork, part: Part, figures: dict[str, Figure]) -> float | None:
    """Tokens/s of one part: the stage's figure x its processes; for generation, on a CPU each engine
    step's own cost (decode_step_s) spread over the requests in flight, on a GPU the rate scaled down
    when fewer requests are in flight than generate_concurrency (each request then runs at
    generate_tok_s / generate_concurrency: an upper bound on time, as one request alone decodes faster)."""
    value = figures[work.figure].value
    if value is None:
        return None
    rate = value * work.processes
    step, ref = figures.get("decode_step_s"), figures["generate_concurrency"].value
    if part.in_flight is not None and step is not None and step.value is not None:
        return decode_rate(rate, step.value, part.in_flight)
    if part.in_flight is not None and ref:
        rate *= min(1.0, part.in_flight / ref)
    return rate


def part_seconds(work: StageWork, figures: dict[str, Figure]) -> list[tuple[Part, float | None, float | None]]:
    """(part, tokens/s, seconds) of each part; None where a figure is missing."""
    out = []
    for p in work.parts:
        rate = part_rate(work, p, figures)
        out.append((p, rate, 0.0 if not p.tokens else None if rate is None else p.tokens / rate))
    return out


def stage_seconds(work: StageWork, figures: dict[str, Figure]) -> float | None:
    start = figures["engine_start_s"].value
    if work.engine_starts and start is None:
        return None
    seconds = [s for _, _, s in part_seconds(work, figures)]
    return None if None in seconds else work.engine_starts * (start or 0.0) + sum(s or 0.0 for s in seconds)


def _figure_text(work: StageWork, figures: dict[str, Figure]) -> str:
    f, start, ref = figures[work.figure], figures["engine_start_s"], figures["generate_concurrency"]
    text = f"{f.key} {figure_value(f.value)}"
    step = figures.get("decode_step_s")
    if any(p.in_flight is not None for p in work.parts) and step is not None and step.value is not None:
        text = f"n in flight / ({step.key} {step.value:g} + n / {text})"
    elif any(p.in_flight is not None for p in work.parts) and ref.value:
        text += f" x min(1, in flight / {figure_value(ref.value)})"
    if work.processes > 1:
        text += f" x {work.processes} processes"
    return text + (f"; {start.key} {figure_value(start.value)} s" if work.engine_starts else "")


def stage_costs(works: Sequence[StageWork], figures: dict[str, Figure]) -> list[StageCost]:
    out = []
    for w in works:
        s = stage_seconds(w, figures)
        gpu_h = s / HOUR * w.gpus if s is not None and w.gpus else None
        parts = tuple(
            {
                "tokens": p.tokens,
                "in_flight": p.in_flight,
                "label": p.label,
                "tok_s": _round(r, 1),
                "wall_s": _round(sec, 1),
            }
            for p, r, sec in part_seconds(w, figures)
        )
        out.append(
            StageCost(
                w.stage, w.work, w.engine_starts, w.tokens, _figure_text(w, figures), s, w.gpus, gpu_h, w.note, parts
            )
        )
    return out


def totals(costs: Sequence[StageCost]) -> dict[str, Any]:
    """Stages run one after another: hours add, and so do GPU-hours. `complete`: no stage lacks a figure."""
    walls = [c.wall_s for c in costs]
    wall = sum(w for w in walls if w is not None)
    gpu_h = sum(c.gpu_h for c in costs if c.gpu_h is not None) if any(c.gpus for c in costs) else None
    return {
        "wall_s": round(wall, 1),
        "wall_h": round(wall / HOUR, 2),
        "gpu_h": None if gpu_h is None else round(gpu_h, 1),
        # each stage's share of the GPU-hours (the bench's is the question a budget asks first)
        "gpu_h_share": {c.stage: round(c.gpu_h / gpu_h, 3) for c in costs if c.gpu_h is not None and gpu_h}
        if gpu_h
        else {},
        "complete": all(w is not None for w in walls),
    }


MODEL = (
    "seconds = engine starts x engine_start_s + tokens / rate, rate = figure x processes, for generation "
    "on a CPU n in flight / (decode_step_s + n / generate_tok_s), on a GPU x min(1, requests in flight / "
    "generate_concurrency) (fewer in flight: each request at generate_tok_s / generate_concurrency, an "
    "upper bound, as a lone request decodes faster); GPU-hours = "
    "hours x GPUs held; stages run one after another, so both add"
)
NOT_COUNTED = (
    "the vocabulary, report and gate (minutes); loading the transformers forward and "
    "starting torchrun; the T > 0 re-scoring of bench outputs (one prefill per output); open-loop arms' "
    "arrival time (an arm at bench.request_rate R lasts at least its requests / R); prompt prefill "
    "beyond what generate_tok_s includes"
)


def plan_work(recipe: Recipe, n: PlanNumbers) -> list[StageWork]:
    gpus = n.serving_gpus
    agreement = agreement_work(recipe, n.num_prompts, n.sample_tokens)
    works = [
        responses_work(recipe, n.num_prompts, gpus),
        *([agreement] if agreement else []),
        hidden_work(recipe, n.sample_tokens, gpus),
        training_work(recipe, n.sample_tokens, gpus > 0),
    ]
    if n.suite_requests is not None:
        works.append(bench_work(recipe, bench_count(recipe, n.suite_requests), gpus))
    return works


def hidden_by_mode(recipe: Recipe, n: PlanNumbers, figures: dict[str, Figure]) -> dict[str, Any]:
    """Both modes side by side: offline stores every state once; online stores a few samples' but
    extracts every epoch."""
    out: dict[str, Any] = {"planned": recipe.train.hidden_states_mode}
    for mode, disk in n.disk_gib.items():
        if disk is None:
            out[mode] = "needs train.hidden_states_source = 'vllm' (a live extraction server)"
            continue
        [c] = stage_costs([hidden_work(recipe, n.sample_tokens, n.serving_gpus, mode)], figures)
        out[mode] = {
            "disk_gib": disk,
            "extraction_s": _round(c.wall_s, 1),
            "extraction_h": _round(c.wall_h, 3),
            "gpu_h": _round(c.gpu_h, 1),
        }
    return out


def plan_cost(recipe: Recipe, n: PlanNumbers, figures: Sequence[Figure]) -> dict[str, Any]:
    figs = by_key(figures)
    costs = stage_costs(plan_work(recipe, n), figs)
    return {
        "model": MODEL,
        "stages": [c.to_dict() for c in costs],
        "total": totals(costs),
        "hidden_states_by_mode": hidden_by_mode(recipe, n, figs),
        "assumptions": [f.to_dict() for f in figures],
        "not_counted": NOT_COUNTED,
    }


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)
