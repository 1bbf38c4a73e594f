"""The throughput figures the cost model turns work into hours with (harness/plan/cost.py): the
recipe's [cost] table over the device's defaults, each saying where it comes from (cited, derived from
cited figures, an assumption, or measured), and the numbers a default is derived from: on a GPU the
cited peak and the verifier's active parameters, on a CPU the two models the figures were measured on
(harness/plan/cpu_figures.py) and this verifier's size. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.plan.cpu_figures import (
    DECODE_STEP,
    DECODE_TOKEN,
    ENGINE_START,
    EXTRACT,
    STANDIN_JOB,
    TRAIN,
    TTT_STEPS,
    Line,
    cpu_rates,
)
from harness.plan.model_cost import Params
from harness.recipe import CostSection

RECIPE, CITED, DERIVED, ASSUMPTION, MEASURED = "recipe", "cited", "derived", "assumption", "measured"
UNITS = {
    "engine_start_s": "s per engine start",
    "generate_tok_s": "output tokens/s per serving instance",
    "generate_concurrency": "requests in flight",
    "extract_tok_s": "tokens/s per extraction instance",
    "train_tok_s": "tokens/s per training process",
}
FIGURES = tuple(CostSection.model_fields)  # the [cost] keys, in the recipe's order

# GPU figures (device "cuda": one 8xH200 node serves Kimi-K2.5)
H200_BF16_FLOPS = 989e12  # dense BF16 tensor-core peak per GPU; the datasheet's 1,979 TFLOP/s is with sparsity
H200_SOURCE = "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): BF16 tensor core 1,979 TFLOP/s with sparsity"
MFU = 0.30  # model-FLOPs utilisation of prefill and draft training: an assumption, not a cited figure
LAMBDA_B200_TOK_S, LAMBDA_CONCURRENCY = 1408, 32
LAMBDA_URL = "https://lambda.ai/inference-models/moonshotai/kimi-k2.6"
H200_PER_B200_BANDWIDTH = 4.8 / 8.0  # HBM TB/s; decode reads every active weight per step, so it scales with these
BANDWIDTH_URL = "https://inferencex.semianalysis.com/blog/b200-nvfp4-vs-h200-int4-kimi-k2-vllm-perf-per-dollar"
KIMI_CARD_ACTIVE = "Kimi-K2.5 model card (huggingface.co/moonshotai/Kimi-K2.5): 32 B activated parameters"


@dataclass(frozen=True)
class Figure:
    """A number the model uses: its value, unit, basis (RECIPE, CITED, DERIVED, ASSUMPTION, MEASURED) and source."""

    key: str
    value: float | None
    unit: str
    basis: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _figure(key: str, value: float | None, basis: str, source: str) -> Figure:
    return Figure(key, value, UNITS[key], basis, source)


def gpu_defaults(instance_gpus: int, active: int | None, draft_params: int, positions: float) -> list[Figure]:
    """Device "cuda" (H200): the default figures, then the inputs they are derived from. `draft_params`:
    the draft's matmul parameters (an embedding lookup costs no FLOPs); `positions`: draft positions
    computed per training token (EAGLE-3: its TTT steps; P-EAGLE: its COD sample's share)."""
    extract = instance_gpus * H200_BF16_FLOPS * MFU / (2 * active) if active else None
    train = H200_BF16_FLOPS * MFU / (6 * draft_params * positions)
    return [
        _figure(
            "engine_start_s",
            600.0,
            ASSUMPTION,
            "not a cited figure: ~555 GiB of weights read, torch.compile and CUDA-graph capture; set "
            "cost.engine_start_s from your own cluster's logs",
        ),
        _figure(
            "generate_tok_s",
            round(LAMBDA_B200_TOK_S * H200_PER_B200_BANDWIDTH),
            DERIVED,
            f"Lambda's vLLM benchmark of Kimi-K2.6 (the K2.5 architecture) on one 8-GPU HGX B200 node: "
            f"{LAMBDA_B200_TOK_S:,} output tok/s at {LAMBDA_CONCURRENCY} concurrent requests, 8,192 in / 2,048 "
            f"out ({LAMBDA_URL}), x H200/B200 HBM bandwidth 4.8/8.0 TB/s (decode is bandwidth-bound; "
            f"{BANDWIDTH_URL})",
        ),
        _figure(
            "generate_concurrency", LAMBDA_CONCURRENCY, CITED, f"the same benchmark's --max-concurrency ({LAMBDA_URL})"
        ),
        _figure(
            "extract_tok_s",
            None if extract is None else round(extract),
            DERIVED if extract else ASSUMPTION,
            f"{instance_gpus} GPUs x {H200_BF16_FLOPS / 1e12:g} TFLOP/s (H200 peak) x MFU {MFU} / "
            f"(2 FLOP x {active / 1e9:.1f} B active params per token)"
            if active
            else "no active-parameter count from the verifier's config: set cost.extract_tok_s",
        ),
        _figure(
            "train_tok_s",
            round(train),
            DERIVED,
            f"{H200_BF16_FLOPS / 1e12:g} TFLOP/s (H200 peak) x MFU {MFU} / (6 FLOP x {draft_params / 1e6:,.0f} M "
            f"draft matmul params x {positions:.3g} draft positions per token)",
        ),
        Figure("gpu_peak_flops", H200_BF16_FLOPS, "FLOP/s per GPU (dense BF16)", CITED, H200_SOURCE),
        Figure("mfu", MFU, "fraction of peak", ASSUMPTION, "not a cited figure: prefill and training at 30 % of peak"),
        Figure(
            "active_params",
            active,
            "params per token",
            DERIVED,
            f"from the verifier's config: attention, routed + shared experts, router, LM head (for Kimi-K2.5: "
            f"{KIMI_CARD_ACTIVE})",
        ),
        Figure("draft_params", draft_params, "draft matmul params", DERIVED, "the dry run's draft section"),
    ]


def cpu_defaults(verifier: Params | None, draft_params: int, positions: float) -> list[Figure]:
    """Device "cpu": each figure a fixed part + a part per unit of work, through two recorded main jobs
    (harness/plan/cpu_figures.py), taken at this verifier's and draft's size; without their sizes, at
    the stand-in's."""
    if verifier is not None and draft_params > 0:
        r, basis = cpu_rates(verifier, draft_params, positions), DERIVED
        at = (
            f"at this verifier's {verifier.active / 1e6:,.1f} M active / {verifier.total / 1e6:,.1f} M params "
            f"and its draft's {draft_params / 1e6:,.2f} M matmul params x {positions:.3g} positions"
        )
    else:
        r, basis = cpu_rates(STANDIN_JOB.params, STANDIN_JOB.draft_params, TTT_STEPS), MEASURED
        at = f"at {STANDIN_JOB.model}'s size (the verifier's config not read)"

    def fig(key: str, value: float, line: Line) -> Figure:
        return _figure(key, round(value, 3 if value < 10 else 1), basis, f"{at}; {line.source}")

    return [
        fig("engine_start_s", r.engine_start_s, ENGINE_START),
        fig("generate_tok_s", r.generate_tok_s, DECODE_TOKEN),
        _figure("generate_concurrency", None, ASSUMPTION, "not used on a CPU: decode_step_s models concurrency"),
        fig("extract_tok_s", r.extract_tok_s, EXTRACT),
        fig("train_tok_s", r.train_tok_s, TRAIN),
        Figure(
            "decode_step_s",
            round(r.decode_step_s, 4),
            "s per engine step, whatever the batch",
            basis,
            f"{at}; rate(n in flight) = n / (decode_step_s + n / generate_tok_s); {DECODE_STEP.source}",
        ),
    ]


def default_figures(
    device: str,
    instance_gpus: int = 1,
    active: int | None = None,
    draft_params: int = 0,
    positions: float = 1,
    verifier: Params | None = None,
) -> list[Figure]:
    """The device's defaults (the five [cost] figures first, then what they are derived from);
    `verifier`: its sizes (harness/plan/model_cost.py), which the CPU figures scale with."""
    if device == "cuda":
        return gpu_defaults(instance_gpus, active, draft_params, positions)
    return cpu_defaults(verifier, draft_params, positions)


def with_recipe(cost: CostSection, defaults: Sequence[Figure]) -> list[Figure]:
    """The recipe's [cost] figures over the defaults, labelled RECIPE. A recipe's generate_tok_s is
    taken at every concurrency: the CPU's decode_step_s (measured with the default) is dropped."""
    set_ = cost.model_dump(exclude_none=True)
    out = [_figure(f.key, set_[f.key], RECIPE, "[cost] in the recipe") if f.key in set_ else f for f in defaults]
    if "generate_tok_s" in set_:
        out = [f for f in out if f.key != "decode_step_s"]
    return out


def by_key(figures: Sequence[Figure]) -> dict[str, Figure]:
    return {f.key: f for f in figures}


def figures_from(section: dict[str, Any]) -> list[Figure]:
    """The figures a cost section used (its JSON form read back)."""
    return [Figure(**a) for a in section.get("assumptions", [])]


def figure_value(v: float | None) -> str:
    if v is None:
        return "?"
    if v >= 1e12:
        return f"{v / 1e12:g}e12"
    if v >= 1e9:
        return f"{v / 1e9:.2f}e9"
    return f"{v:,.0f}" if v >= 100 or float(v).is_integer() else f"{v:.3g}"
