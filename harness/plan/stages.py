"""The work of each stage of the plan, in counts: engine starts and the tokens each part of a stage
pushes through its figure (harness/plan/figures.py). The bench's work is counted from the cells
harness/bench/grid.py plans (and, spread over nodes, the share harness/bench/placement.py gives a
node). Pure: the dry run's numbers in (PlanNumbers), StageWork out; harness/plan/cost.py prices it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.analysis.machine import CALIBRATION_RUNS, SENTINEL_PROMPTS, sentinel_tokens
from harness.cluster import baseline_repeats, engine_schedule, instance_gpus
from harness.recipe import EngineSettings, Recipe


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


def agreement_work(recipe: Recipe, num_prompts: int | None, sample_tokens: int) -> StageWork | None:
    """The train/serve agreement gate (harness/train/states.py): the transformers forward, teacher-forced
    over train.agreement_samples of the responses, on the CPU; none when vLLM extracts the states."""
    t = recipe.train
    if t.hidden_states_source == "vllm":
        return None
    n = min(t.agreement_samples, num_prompts or t.agreement_samples)
    per_sample = sample_tokens / max(num_prompts or 1, 1)
    return StageWork(
        "agreement",
        f"{n} responses (~{per_sample:,.0f} tokens each) teacher-forced through the transformers forward",
        "extract_tok_s",
        (Part(round(n * per_sample)),),
        note="probing vLLM's layers when agreement falls below its threshold not counted",
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
        gpus=serving_gpus * (count.engines if b.race else 1 if aba else 2),  # a race holds every engine up
        note="upper bound: every request runs to bench.max_tokens; speculative arms costed at the verifier's "
        "decode rate (a draft that speeds decoding shortens them); "
        + (
            f"sequential paired cells priced at every prompt (their budget is gate.max_prompts = "
            f"{recipe.gate.max_prompts}, and they stop when the verdict settles: 33-55 % of it on the demo's model); "
            if recipe.gate.max_prompts
            else ""
        )
        + (
            "raced settings priced at every prompt for every arm (bench.race: an arm stops once its rank is settled); "
            if recipe.bench.race
            else ""
        )
        + "GPUs: "
        + (
            "one engine at a time (bench.engine_schedule), the baseline before and after the speculative engines"
            if aba
            else "every engine up at once (bench.race)"
            if b.race
            else "the baseline engine stays up beside each speculative engine"
        ),
    )
