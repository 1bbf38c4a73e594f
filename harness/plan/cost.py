"""What a plan costs: each stage's work (engine starts, tokens) turned into wall time and GPU-hours
by throughput figures — the recipe's [cost] table, else the device's defaults, each saying where it
comes from (cited, derived from cited figures, an assumption, or measured).

  seconds   = engine starts x engine_start_s + sum over the stage's parts of tokens / rate
  rate      = the stage's figure x processes working at once (training); for generation also
              x min(1, requests in flight / generate_concurrency)
  GPU-hours = hours x GPUs held while the stage runs (none on a CPU)

Stages run one after another, so their hours add. Pure: the dry run feeds it the plan's numbers
(harness/plan/dry_run.py), the rehearsal what its run folder measured (harness/plan/cost_measured.py),
and both print the same table (`render_cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.analysis.machine import CALIBRATION_RUNS, SENTINEL_PROMPTS, sentinel_tokens
from harness.cluster import baseline_repeats, engine_schedule, instance_gpus
from harness.recipe import CostSection, EngineSettings, Recipe

HOUR = 3600.0
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

# CPU figures: the CI-size training of the tiny Kimi stand-in (tests/conftest.py CI_TRAIN) on a quiet 2-core AVX2
# CPU, float32; the rehearsal re-measures them (rehearsal.json "cost")
CPU_RUN = "measured on a quiet 2-core AVX2 CPU (tiny Kimi stand-in, float32, CI-size training; docs/cluster-run.md)"
CPU_DEFAULTS: dict[str, tuple[float | None, str]] = {
    "engine_start_s": (7.0, f"{CPU_RUN}: 5-8 s from spawn to ready (bench manifests' startup_s)"),
    "generate_tok_s": (560.0, f"{CPU_RUN}: 36,864 output tokens (384 prompts x 96) in ~66 s, 128 in flight"),
    "generate_concurrency": (None, "not modelled on a CPU: generate_tok_s is taken at every concurrency"),
    "extract_tok_s": (
        3035.0,
        f"{CPU_RUN}: 81,332 tokens in 26.8 s through the transformers forward (hidden/done.json)",
    ),
    "train_tok_s": (1140.0, f"{CPU_RUN}: 217,158 tokens in 190 s, 1 process, hidden 256 (fit_result.json)"),
}


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


@dataclass(frozen=True)
class Part:
    """Tokens a stage pushes through its figure; `in_flight`: requests at once (generation only)."""

    tokens: int
    in_flight: int | None = None
    label: str = ""  # what the part is, where a stage has several ("sentinels")


@dataclass(frozen=True)
class StageWork:
    stage: str
    work: str  # what the stage does, in counts
    figure: str  # the FIGURES key that turns its tokens into seconds
    parts: tuple[Part, ...]
    engine_starts: int = 0
    gpus: int = 0  # GPUs held while it runs
    processes: int = 1  # working at once, each at the figure's rate (training)
    note: str = ""

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.parts)


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


# ----------------------------------------------------------------------------- figures


def active_params(tc: dict[str, Any]) -> int | None:
    """Weights one token's forward multiplies through (2 FLOPs each): attention, the MLP (in a MoE
    layer the routed experts a token picks, the shared experts and the router) and the LM head; not
    the embedding lookup, not attention over the context. None when the config lacks a size."""
    try:
        h, layers = tc["hidden_size"], tc["num_hidden_layers"]
        attn = _mla_params(tc) if "kv_lora_rank" in tc else _mha_params(tc)
        dense_mlp = 3 * h * tc["intermediate_size"]
        if routed := tc.get("n_routed_experts"):
            dense = tc.get("first_k_dense_replace", 0)
            experts = tc["num_experts_per_tok"] + (tc.get("n_shared_experts") or 0)
            moe = experts * 3 * h * tc["moe_intermediate_size"] + h * routed
            mlp = dense * dense_mlp + (layers - dense) * moe
        else:
            mlp = layers * dense_mlp
        return int(layers * attn + mlp + tc["vocab_size"] * h)
    except (KeyError, TypeError):
        return None


def _mla_params(tc: dict[str, Any]) -> int:
    h, heads, rank, rope = tc["hidden_size"], tc["num_attention_heads"], tc["kv_lora_rank"], tc["qk_rope_head_dim"]
    qk = tc["qk_nope_head_dim"] + rope
    q = h * tc["q_lora_rank"] + tc["q_lora_rank"] * heads * qk if tc.get("q_lora_rank") else h * heads * qk
    kv = h * (rank + rope) + rank * heads * (tc["qk_nope_head_dim"] + tc["v_head_dim"])
    return q + kv + heads * tc["v_head_dim"] * h


def _mha_params(tc: dict[str, Any]) -> int:
    h, heads = tc["hidden_size"], tc["num_attention_heads"]
    hd, kv = tc.get("head_dim") or h // heads, tc.get("num_key_value_heads") or heads
    return 2 * h * heads * hd + 2 * h * kv * hd  # q and o; k and v


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


def default_figures(
    device: str, instance_gpus: int = 1, active: int | None = None, draft_params: int = 0, positions: float = 1
) -> list[Figure]:
    """The device's defaults (the five [cost] figures first, then what they are derived from)."""
    if device == "cuda":
        return gpu_defaults(instance_gpus, active, draft_params, positions)
    return [_figure(k, v, MEASURED if v is not None else ASSUMPTION, src) for k, (v, src) in CPU_DEFAULTS.items()]


def with_recipe(cost: CostSection, defaults: Sequence[Figure]) -> list[Figure]:
    """The recipe's [cost] figures over the defaults, labelled RECIPE."""
    set_ = cost.model_dump(exclude_none=True)
    return [_figure(f.key, set_[f.key], RECIPE, "[cost] in the recipe") if f.key in set_ else f for f in defaults]


def by_key(figures: Sequence[Figure]) -> dict[str, Figure]:
    return {f.key: f for f in figures}


# ----------------------------------------------------------------------------- the arithmetic


def part_rate(work: StageWork, part: Part, figures: dict[str, Figure]) -> float | None:
    """Tokens/s of one part: the stage's figure x its processes, and for generation scaled down when
    fewer requests are in flight than generate_concurrency (each request then runs at
    generate_tok_s / generate_concurrency: an upper bound on time, as one request alone decodes faster)."""
    value = figures[work.figure].value
    if value is None:
        return None
    rate = value * work.processes
    ref = figures["generate_concurrency"].value
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
    text = f"{f.key} {_num(f.value)}"
    if any(p.in_flight is not None for p in work.parts) and ref.value:
        text += f" x min(1, in flight / {_num(ref.value)})"
    if work.processes > 1:
        text += f" x {work.processes} processes"
    return text + (f"; {start.key} {_num(start.value)} s" if work.engine_starts else "")


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


def _num(v: float | None) -> str:
    if v is None:
        return "?"
    if v >= 1e12:
        return f"{v / 1e12:g}e12"
    if v >= 1e9:
        return f"{v / 1e9:.2f}e9"
    return f"{v:,.0f}" if v >= 100 or float(v).is_integer() else f"{v:.3g}"


# ----------------------------------------------------------------------------- the work


@dataclass(frozen=True)
class PlanNumbers:
    """What the dry run knows of the work (harness/plan/dry_run.py)."""

    num_prompts: int | None  # training prompts (None: read at run time)
    sample_tokens: int  # prompt + response tokens of all samples (the plan's estimate)
    serving_gpus: int  # GPUs of one serving instance (tensor x pipeline parallel); 0 on a CPU
    disk_gib: dict[str, float | None]  # hidden states on disk, by train.hidden_states_mode
    suite_requests: tuple[tuple[str, int | None], ...] | None = None  # bench: (suite spec, requests per arm)


def serving_gpus(engine: EngineSettings) -> int:
    """GPUs one serving instance holds (tensor x pipeline parallel ranks); none on a CPU."""
    return instance_gpus(engine)


def responses_work(recipe: Recipe, num_prompts: int | None, gpus: int) -> StageWork:
    t = recipe.train
    n = num_prompts or 0
    parts = [Part(n * t.max_new_tokens, t.response_concurrency)]
    greedy = min(t.agreement_samples, n) if t.response_temperature > 0 else 0  # the agreement gate's greedy twins
    parts += [Part(greedy * t.max_new_tokens, t.response_concurrency)] if greedy else []
    return StageWork(
        "responses",
        f"1 engine start; {n + greedy:,} prompts x <= {t.max_new_tokens:,} new tokens "
        f"({t.response_concurrency} in flight)" + ("" if num_prompts else "; prompts unknown: set train.num_prompts"),
        "generate_tok_s",
        tuple(parts),
        engine_starts=1,
        gpus=gpus,
        note="upper bound: every response runs to train.max_new_tokens",
    )


def hidden_work(recipe: Recipe, sample_tokens: int, gpus: int, mode: str | None = None) -> StageWork:
    """Offline: one pass over the samples, states to disk. Online: speculators deletes a sample's
    states after use, so the extraction server takes every sample again each epoch, on the GPUs the
    training uses (their hours add: both compute on the same GPUs)."""
    t = recipe.train
    mode = mode or t.hidden_states_mode
    vllm = t.hidden_states_source == "vllm"
    passes = t.epochs if mode == "online" else 1
    return StageWork(
        f"hidden states ({mode})",
        ("1 engine start; " if vllm else "")
        + f"{sample_tokens:,} prompt + response tokens through the verifier"
        + (f", x {passes} epochs" if passes > 1 else ""),
        "extract_tok_s",
        (Part(sample_tokens * passes),),
        engine_starts=1 if vllm else 0,
        gpus=gpus if vllm else 0,  # the transformers forward runs on the CPU
        note="during training, on its GPUs: extracted again every epoch" if mode == "online" else "",
    )


def training_work(recipe: Recipe, sample_tokens: int, on_gpus: bool) -> StageWork:
    t = recipe.train
    procs = t.nproc_per_node * t.nnodes
    return StageWork(
        "training",
        f"{sample_tokens:,} tokens x {t.epochs} epochs, {procs} process(es) x {t.ttt_steps} "
        + {"peagle": "P-EAGLE depths", "dflash": "DFlash block slots"}.get(recipe.draft.method, "TTT steps"),
        "train_tok_s",
        (Part(sample_tokens * t.epochs),),
        gpus=procs if on_gpus else 0,
        processes=procs,
        note="held-out share included (its forward-only pass costed as training)",
    )


@dataclass(frozen=True)
class BenchCount:
    engines: int
    cells: int
    speculative_arms: int  # measured arms, repeats counted
    baseline_arms: int
    requests: int  # measured requests (turns counted)
    tokens_by_concurrency: dict[int, int]  # measured arms' output tokens (upper bound), by requests in flight
    overhead_tokens: dict[int, int]  # warm-up and machine-sentinel tokens, by requests in flight
    unknown_suites: int  # suites whose size is read at run time
    starts_saved: int = 0  # speculative engines bench.k_from_one_engine does not start


def _verifier_groups(recipe: Recipe) -> list[int]:
    """Drafts per verifier engine: the draft and its reference drafts, the oracle on a verifier of its own."""
    refs = [r for r in recipe.bench.reference_drafts if not (r == "ngram" and recipe.bench.method == "ngram")]
    return [1 + sum(r != "oracle" for r in refs)] + ([1] if "oracle" in refs else [])


def _grid(recipe: Recipe, drafts: int, names: Sequence[str], aliases: dict[str, list[str]]) -> list:
    """The cells harness/bench/grid.py plans over the suites `names` (one per bench_count suite request)."""
    from harness.bench.grid import plan_grid

    return plan_grid(recipe.bench, [str(d) for d in range(drafts)], names, aliases)


def _kept(recipe: Recipe, cells: list, reqs: Sequence[int], node: tuple[int, int] | None) -> list:
    """The cells node (index, of) measures when the bench spreads over nodes (harness/bench/placement.py)."""
    if node is None:
        return cells
    from harness.bench.placement import bench_weight, place

    placed = place(cells, node[1], bench_weight(recipe.bench, {f"#{i}": n for i, n in enumerate(reqs)}))
    return [c for c in cells if placed[c] == node[0]]


def bench_count(
    recipe: Recipe, suite_requests: Sequence[tuple[str, int | None]], node: tuple[int, int] | None = None
) -> BenchCount:
    """The bench's work; `node` (index, of): only the cells that node measures when the bench spreads
    over several (each node starts the engines its cells need)."""
    b = recipe.bench
    from harness.bench.grid import recipe_suite_aliases

    # one name per request entry (an expanded spec, once per thinking mode: plan.py _suite_requests)
    names = [f"#{i}" for i in range(len(suite_requests))]
    aliases = recipe_suite_aliases(b, names)
    reqs = [n or 0 for _, n in suite_requests]
    engines = spec_arms = base_arms = runs = cells_n = saved = 0
    tokens: dict[int, int] = {}
    # one engine at a time: the baseline engine starts twice (before and after the speculative ones), its
    # arm split over both (harness/cluster.py baseline_repeats), a sentinel at every start
    aba = engine_schedule(recipe) == "one_at_a_time"
    base_repeats = sum(baseline_repeats(b.repeats)) if aba else b.repeats
    for drafts in _verifier_groups(recipe):
        cells = _kept(recipe, _grid(recipe, drafts, names, aliases), reqs, node)
        if not cells:
            continue
        # the baseline arm: once per (suite, concurrency, temperature, rate) when shared, else beside every cell
        keys = [
            (c.suite, c.concurrency, c.temperature, c.request_rate, i * (not b.shared_baseline))
            for i, c in enumerate(cells)
        ]
        bases = sorted(set(keys))
        arms = [(c.suite, c.concurrency, b.repeats) for c in cells] + [(k[0], k[1], base_repeats) for k in bases]
        for suite, conc, repeats in arms:
            tokens[conc] = tokens.get(conc, 0) + b.prompts_at(conc, reqs[int(suite[1:])]) * b.max_tokens * repeats
        starts = 1 + aba + len({(c.draft, c.k) for c in cells})
        engines += starts
        saved += drafts * (len(b.k) - len(b.engine_ks))
        spec_arms, base_arms = spec_arms + len(cells) * b.repeats, base_arms + len(bases) * base_repeats
        # side by side: a sentinel around every arm; one at a time: at each engine's start and end only
        around_arms = len(cells) + len(cells) * b.repeats + len(bases) * base_repeats
        runs += (CALIBRATION_RUNS + (2 * starts if aba else around_arms)) * b.machine_sentinel
        cells_n += len(cells)
    temps = len(set(b.temperature) | {x.temperature for x in b.extra_cells})
    overhead = {SENTINEL_PROMPTS: runs * SENTINEL_PROMPTS * sentinel_tokens(b.max_tokens)}
    warm = engines * b.warmup_requests * temps * min(16, b.max_tokens)
    overhead[max(b.concurrency)] = overhead.get(max(b.concurrency), 0) + warm
    requests = sum(tokens.values()) // b.max_tokens
    unknown = sum(n is None for _, n in suite_requests)
    return BenchCount(engines, cells_n, spec_arms, base_arms, requests, tokens, overhead, unknown, saved)


def bench_work(recipe: Recipe, count: BenchCount, serving_gpus: int) -> StageWork:
    b, aba = recipe.bench, engine_schedule(recipe) == "one_at_a_time"
    starts = 0 if b.engine == "attach" else count.engines
    parts = [Part(t, c) for c, t in sorted(count.tokens_by_concurrency.items())]
    parts += [Part(t, c, "warm-up + sentinels") for c, t in sorted(count.overhead_tokens.items()) if t]
    overhead = sum(count.overhead_tokens.values())
    return StageWork(
        "bench",
        f"{starts} engine starts"
        + (f" ({count.starts_saved} saved: k < {max(b.k)} estimated from one engine)" if count.starts_saved else "")
        + f"; {count.cells:,} cells x {b.repeats} repeats = {count.speculative_arms:,} "
        f"speculative + {count.baseline_arms:,} baseline arms, {count.requests:,} requests x <= {b.max_tokens} "
        f"tokens; + {overhead:,} warm-up and sentinel tokens"
        + (f"; {count.unknown_suites} suite(s) of unknown size: set bench.num_prompts" if count.unknown_suites else ""),
        "generate_tok_s",
        tuple(parts),
        engine_starts=starts,
        gpus=serving_gpus * (1 if aba else 2),
        note="upper bound: every request runs to bench.max_tokens; speculative arms costed at the verifier's "
        "decode rate (a draft that speeds decoding shortens them); GPUs: "
        + (
            "one engine at a time (bench.engine_schedule), the baseline before and after the speculative engines"
            if aba
            else "the baseline engine stays up beside each speculative engine"
        ),
    )


# ----------------------------------------------------------------------------- the dry run's section

MODEL = (
    "seconds = engine starts x engine_start_s + tokens / rate, rate = figure x processes, for generation "
    "also x min(1, requests in flight / generate_concurrency) (fewer in flight: each request at "
    "generate_tok_s / generate_concurrency, an upper bound, as a lone request decodes faster); GPU-hours = "
    "hours x GPUs held; stages run one after another, so both add"
)
NOT_COUNTED = (
    "the agreement gate, vocabulary, report and gate (minutes); loading the transformers forward and "
    "starting torchrun; the T > 0 re-scoring of bench outputs (one prefill per output); open-loop arms' "
    "arrival time (an arm at bench.request_rate R lasts at least its requests / R); prompt prefill "
    "beyond what generate_tok_s includes"
)


def plan_work(recipe: Recipe, n: PlanNumbers) -> list[StageWork]:
    gpus = n.serving_gpus
    works = [
        responses_work(recipe, n.num_prompts, gpus),
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


def figures_from(section: dict[str, Any]) -> list[Figure]:
    """The figures a cost section used (its JSON form read back)."""
    return [Figure(**a) for a in section.get("assumptions", [])]


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


# ----------------------------------------------------------------------------- rendering


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 2 * HOUR else f"{seconds / HOUR:,.1f} h"


def _work_cell(stage: dict[str, Any]) -> str:
    """The work, what bounds it, and with several concurrencies the time each takes."""
    from rich.markup import escape

    text = escape(stage["work"])
    timed = [p for p in stage.get("parts", ()) if p["in_flight"] is not None and p["tokens"]]
    if len(timed) > 1:
        text += (
            "\n[dim]by requests in flight: "
            + " · ".join(f"{_in_flight(p)}: {duration(p['wall_s'])}" for p in timed)
            + "[/]"
        )
    return text + (f"\n[dim]{escape(stage['note'])}[/]" if stage.get("note") else "")


def _in_flight(part: dict[str, Any]) -> str:
    return f"{part['label']} ({part['in_flight']})" if part.get("label") else str(part["in_flight"])


def render_cost(section: dict[str, Any], console) -> None:
    """The cost table (the dry run's, or the rehearsal's with what it measured), the hidden-state
    modes side by side, and every figure with its source."""
    measured = any("measured" in s for s in section["stages"])
    console.print(_measured_table(section) if measured else _plan_table(section))
    if share := section["total"].get("gpu_h_share"):
        text = " · ".join(f"{stage} {v:.0%}" for stage, v in share.items())
        console.print(f"GPU-hours by stage: {text}", highlight=False)
    _render_modes(section.get("hidden_states_by_mode") or {}, console)
    _render_assumptions(section["assumptions"], console)
    console.print(f"not counted: {section['not_counted']}", highlight=False, soft_wrap=True, markup=False)


def _plan_table(section: dict[str, Any]):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"what the plan costs ({section['model']})"), title_justify="left")
    for col in ("stage", "work", "figure", "hours", "GPUs", "GPU-hours"):
        table.add_column(col, overflow="fold", justify="right" if col in ("hours", "GPUs", "GPU-hours") else "left")
    for s in section["stages"]:
        gpu_h = "-" if s["gpu_h"] is None else f"{s['gpu_h']:,.1f}"
        table.add_row(
            s["stage"], _work_cell(s), escape(s["figure"]), duration(s["wall_s"]), str(s["gpus"] or "-"), gpu_h
        )
    tot = section["total"]
    gpu_total = "-" if tot["gpu_h"] is None else f"{tot['gpu_h']:,.1f}"
    incomplete = "" if tot["complete"] else " (a figure is missing)"
    table.add_row("total", "", "", f"{duration(tot['wall_s'])}{incomplete}", "", gpu_total, style="bold")
    return table


def _measured_table(section: dict[str, Any]):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"what the run cost, measured vs the model ({section['model']})"), title_justify="left")
    cols = ("stage", "work (measured)", "figure", "predicted", "measured", "measured tok/s", "measured / predicted")
    for col in cols:
        table.add_column(col, overflow="fold", justify="left" if col in cols[:3] else "right")
    for s in section["stages"]:
        m = s.get("measured") or {}
        ratio = "-" if m.get("ratio") is None else f"{m['ratio']:.2f}"
        plan = f"\n[dim]the plan: <= {m['planned_tokens']:,} tokens[/]" if m.get("planned_tokens") else ""
        table.add_row(
            s["stage"],
            _work_cell(s) + plan,
            escape(s["figure"]),
            duration(s["wall_s"]),
            duration(m.get("wall_s")),
            "-" if m.get("tok_s") is None else _num(m["tok_s"]),
            ratio,
        )
    tot = section["total"]
    measured = tot.get("measured_wall_s")
    ratio = f"{measured / tot['wall_s']:.2f}" if measured and tot["wall_s"] else "-"
    table.add_row("total", "", "", duration(tot["wall_s"]), duration(measured), "", ratio, style="bold")
    return table


def _render_modes(modes: dict[str, Any], console) -> None:
    for mode in ("offline", "online"):
        m = modes.get(mode)
        planned = " (planned)" if modes.get("planned") == mode else ""
        if isinstance(m, dict):
            gpu_h = "" if m["gpu_h"] is None else f", {m['gpu_h']:,.1f} GPU-hours"
            console.print(
                f"hidden states {mode}{planned}: {m['disk_gib']:,} GiB on disk, extraction "
                f"{duration(m['extraction_s'])}{gpu_h}",
                highlight=False,
            )
        elif m:
            console.print(f"hidden states {mode}: {m}", highlight=False, markup=False)


def _render_assumptions(assumptions: list[dict[str, Any]], console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="figures and their sources", title_justify="left")
    for col in ("figure", "value", "unit", "basis", "source"):
        table.add_column(col, overflow="fold")
    for a in assumptions:
        value = "-" if a["value"] is None else _num(a["value"])
        table.add_row(a["key"], value, a["unit"], a["basis"], escape(a["source"]))
    console.print(table)
