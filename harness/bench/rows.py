"""One measured cell as result-table rows: the typed record of a row, and the pure step from
two arms' measurements (baseline, speculative) to the pair of rows, flags included.

Formulas: harness/metrics.py. Column groups: harness/results/table.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from harness import metrics
from harness.analysis import slo
from harness.analysis.machine import MachineReading
from harness.bench import breakdown
from harness.bench.breakdown import RepeatRecord
from harness.engine.counters import SpecCounters
from harness.schema import BASELINE, SPECULATIVE, CellIdentity, CellRow
from harness.schema_requests import RequestRecord


@dataclass
class ArmResult:
    """One arm (baseline or speculative) of a cell, summed over repeats and turns."""

    outputs: dict[str, list[int]] = field(default_factory=dict)  # request/turn id -> tokens
    wall_s: float = 0.0
    num_output_tokens: int = 0
    counters: SpecCounters = field(default_factory=SpecCounters)
    tok_s_repeats: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)  # per chunk
    itl_per_token: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)  # ms, per finished request
    per_request: list[tuple[int, int]] = field(default_factory=list)  # (accepted, drafts)
    per_request_al: list[float] = field(default_factory=list)
    num_requests: int = 0
    errors: list[str] = field(default_factory=list)
    foreign_tokens: float = 0.0
    requests: list[RequestRecord] = field(default_factory=list)
    repeats: list[RepeatRecord] = field(default_factory=list)
    # request/turn id -> per output position {token id: logprob} (top-N, first repeat; T = 0 misses)
    logprobs: dict[str, list[dict[int, float]]] = field(default_factory=dict)
    # per turn index, vLLM's prefix-cache counters over the arm's batches: [prompt tokens looked up, found cached]
    prefix_cache_by_turn: list[list[float]] = field(default_factory=list)
    # per turn index, the output tokens and seconds of the arm's rounds (each turn is a batch of its own)
    tokens_wall_by_turn: list[list[float]] = field(default_factory=list)

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Prompt tokens found cached / looked up over every turn (None: no lookups reported)."""
        queried = sum(q for q, _ in self.prefix_cache_by_turn)
        return metrics.hit_rate(queried, sum(h for _, h in self.prefix_cache_by_turn))


def _error_summary(errors: list[str]) -> str | None:
    if not errors:
        return None
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(errors[:3]) + more


def arm_timings(arm: ArmResult) -> list[slo.Timing]:
    return slo.timings_from_records(arm.requests, len(arm.errors))


def turn_speedups(base: ArmResult, spec: ArmResult) -> list[float | None]:
    """Per turn index, the speculative arm's output tok/s over the baseline's (multi-turn suites;
    empty for single-turn ones)."""
    if len(spec.tokens_wall_by_turn) < 2:
        return []

    def rate(arm: ArmResult, t: int) -> float | None:
        tw = arm.tokens_wall_by_turn
        return metrics.output_tok_per_s(int(tw[t][0]), tw[t][1]) if t < len(tw) else None

    return [metrics.speedup(rate(spec, t), rate(base, t)) for t in range(len(spec.tokens_wall_by_turn))]


def fill_goodput(row: CellRow, arm: ArmResult, bounds: dict[str, float]) -> None:
    """Goodput (requests/s meeting every bound) and the share of requests that met them."""
    timings = arm_timings(arm)
    row.goodput = slo.goodput(timings, bounds, arm.wall_s)
    row.slo_attainment = sum(slo.meets(t, bounds) for t in timings) / len(timings) if timings else None


def arm_row(identity: CellIdentity, mode: str, arm: ArmResult) -> CellRow:
    c = arm.counters
    spec = mode == SPECULATIVE
    ci = metrics.bootstrap_ci([a for a, _ in arm.per_request], [d for _, d in arm.per_request]) if spec else None
    generations = arm.num_requests - len(arm.errors)  # each emits its first token from its prefill
    timings = arm_timings(arm) if identity.request_rate else None  # open-loop cells' rates
    return CellRow(
        **dict(identity),
        mode=mode,
        num_requests=arm.num_requests,
        num_failed=len(arm.errors),
        num_output_tokens=arm.num_output_tokens,
        wall_s=arm.wall_s,
        num_drafts=c.num_drafts,
        num_draft_tokens=c.num_draft_tokens,
        num_accepted_tokens=c.num_accepted_tokens,
        accepted_per_pos=list(c.accepted_per_pos),
        acceptance_length=metrics.acceptance_length(c) if spec else None,
        draft_acceptance_rate=metrics.draft_acceptance_rate(c) if spec else None,
        per_position_rates=list(metrics.per_position_rates(c)) if spec else [],
        al_ci_low=ci[0] if ci else None,
        al_ci_high=ci[1] if ci else None,
        per_request_al_mean=metrics.mean(arm.per_request_al),
        output_tok_per_s=metrics.output_tok_per_s(arm.num_output_tokens, arm.wall_s),
        output_tok_per_s_repeats=arm.tok_s_repeats,
        ttft_ms_median=metrics.median(arm.ttft),
        ttft_ms_p99=metrics.percentile(arm.ttft, 99),
        tpot_ms_median=metrics.median(arm.tpot),
        tpot_ms_p99=metrics.percentile(arm.tpot, 99),
        itl_ms_median=metrics.median(arm.itl),
        itl_ms_p99=metrics.percentile(arm.itl, 99),
        itl_per_token_ms_median=metrics.median(arm.itl_per_token),
        itl_per_token_ms_p99=metrics.percentile(arm.itl_per_token, 99),
        ttft_ms_p90=metrics.percentile(arm.ttft, 90),
        tpot_ms_p90=metrics.percentile(arm.tpot, 90),
        itl_per_token_ms_p90=metrics.percentile(arm.itl_per_token, 90),
        e2e_ms_median=metrics.median(arm.e2e),
        e2e_ms_p90=metrics.percentile(arm.e2e, 90),
        e2e_ms_p99=metrics.percentile(arm.e2e, 99),
        arrival_rate=slo.arrival_rate(timings) if timings else None,
        achieved_rate=slo.achieved_rate(timings) if timings else None,
        prefix_cache_hit_rate=arm.prefix_cache_hit_rate,
        prefix_cache_hit_rate_by_turn=[metrics.hit_rate(q, h) for q, h in arm.prefix_cache_by_turn],
        status="failed" if arm.errors else "ok",
        error=_error_summary(arm.errors),
        num_verify_steps=metrics.verify_steps(arm.num_output_tokens, generations, c) if spec else None,
        tokens_per_step=metrics.tokens_per_step(arm.num_output_tokens, generations, c) if spec else None,
    )


def _lossless(
    row: CellRow, base: ArmResult, spec: ArmResult, temperature: float, noise_nats: float | None
) -> list[str]:
    import json

    from harness.analysis.lossless import cell_lossless, same_prompt_requests

    keys, unlike = same_prompt_requests(sorted(set(base.outputs) & set(spec.outputs)), spec.outputs, base.outputs)
    m, n = metrics.lossless_match([spec.outputs[k] for k in keys], [base.outputs[k] for k in keys])
    row.lossless_matches, row.lossless_compared = m, n
    row.lossless_match_rate = m / n if n else None
    if temperature > 0 and n and m < n:
        return [
            "NOT LOSSLESS AT T>0: speculative outputs differ from a verifier that emits one token "
            "(vLLM-CPU rejection sampling, repro/vllm_cpu_spec_sampling_t_gt_0)"
        ]
    if temperature > 0 or m == n:
        return []
    cell = cell_lossless(
        keys,
        [spec.outputs[k] for k in keys],
        [base.outputs[k] for k in keys],
        [base.logprobs.get(k) for k in keys],
        noise_nats,
    )
    cols = cell.columns()
    row.lossless_verdict, row.lossless_first_position = cols["lossless_verdict"], cols["lossless_first_position"]
    row.lossless_noise_nats = cols["lossless_noise_nats"]
    row.lossless_divergences = json.dumps(cols["lossless_divergences"])
    after = f"; {unlike} later turn(s) after a diverged answer not compared (their prompts differ)" if unlike else ""
    return [cast(str, cell.flag()) + after]  # m < n: the cell has a divergence, so a flag


def _sampling(rb: CellRow, rs: CellRow, samples: tuple[list, list] | None, num_top: int) -> list[str]:
    """The T > 0 distribution test on both arms' samples (each token with the verifier's own
    distribution at its position); a flag when the speculative arm fails it (and says so when
    the baseline arm fails too: then the test, not the sampler, is in doubt)."""
    from harness.analysis.lossless_sampling import ALPHA, sampling_fidelity

    if num_top <= 0:
        return []  # switched off (bench.lossless_logprobs = 0): the recipe says so
    if samples is None:  # never silently: a T > 0 cell whose outputs nobody re-scored says so
        return ["T>0 DISTRIBUTION TEST NOT RUN: the baseline engine cannot re-score outputs (no Rescorer)"]
    results = []
    for row, arm_samples in ((rb, samples[0]), (rs, samples[1])):
        f = sampling_fidelity(arm_samples, num_top=num_top)
        row.sampling_rescore = getattr(samples, "rescore", None)  # a RescoredArms says how
        row.sampling_p_value, row.sampling_tv = f.p_value, f.tv_pit
        row.sampling_min_detectable_tv, row.sampling_num_tokens = f.min_detectable_tv, f.num_samples
        results.append(f)
    fb, fs = results
    if fs.passes(ALPHA):
        return []
    if not fb.passes(ALPHA):
        calib = f"; the baseline arm fails it too (p = {fb.p_value:.2g}): the reference, not the sampler, is in doubt"
    else:
        calib = f"; baseline arm p = {fb.p_value:.2g}" if fb.p_value is not None else ""
    return [
        f"NOT LOSSLESS AT T>0: sampled tokens do not follow the verifier's distribution (p = {fs.p_value:.2g} "
        f"over {fs.num_samples} tokens, divergence TV {fs.tv_pit:.3f}, detectable >= {fs.min_detectable_tv:.3f})"
        + calib
    ]


def _machine(rs: CellRow, reading: MachineReading | None) -> list[str]:
    """The sentinels behind the speedup kept in the row; when the machine was not steady across
    the arms, the flag and a speedup CI widened by the drift."""
    from harness.analysis.machine import widen

    if reading is None:
        return []
    rs.machine_sentinels_baseline = [round(x, 2) for x in reading.baseline_tok_s]
    rs.machine_sentinels_speculative = [round(x, 2) for x in reading.speculative_tok_s]
    rs.machine_drift, rs.machine_noise = reading.drift, reading.noise
    rs.machine_baseline_remeasured = reading.baseline_remeasured
    rs.machine_foreign_cpu = round(reading.foreign_cpu, 4)
    flag = reading.flag()
    if flag is None:
        return []
    rs.speedup_ci_low, rs.speedup_ci_high = widen(rs.speedup_ci_low, rs.speedup_ci_high, rs.speedup, reading.drift)
    return [flag]


def _content(
    max_tokens: int, base: ArmResult, spec: ArmResult, ignore_eos: bool, random_prompts: str | None
) -> list[str]:
    """Whether the cell measured text serving sees (harness/analysis/content.py): both arms'
    requests, each once (the first repeat); `random_prompts`: the suite's RANDOM PROMPTS flag."""
    from harness.analysis import content

    finishes = [
        (r.finish_reason, len(r.output_token_ids)) for arm in (base, spec) for r in arm.requests if r.repeat == 0
    ]
    flags = (content.ignore_eos_flag(ignore_eos), content.cut_short_flag(finishes, max_tokens), random_prompts)
    return [f for f in flags if f]


def _prediction(row: CellRow, predicted: float | None, temperature: float) -> None:
    row.predicted_acceptance_length = predicted
    if predicted and row.acceptance_length and temperature == 0:
        row.al_gap = (row.acceptance_length - predicted) / predicted


def cell_rows(
    identity: CellIdentity,
    base: ArmResult,
    spec: ArmResult,
    *,
    predicted_al: float | None,
    deterministic_verifier: bool,
    mismatch_tolerance: float,
    train_context_len: int | None = None,
    end_think_id: int | None = None,
    noise_nats: float | None = None,
    num_top_logprobs: int = 0,
    sampling_samples: tuple[list, list] | None = None,
    machine: MachineReading | None = None,
    k_sweep: bool = False,
    ignore_eos: bool = False,
    random_prompts: str | None = None,
    slo_bounds: dict[str, float] | None = None,
    interleaved: bool = True,
) -> tuple[CellRow, CellRow]:
    """`sampling_samples`: at T > 0, (baseline, speculative) output tokens with the verifier's
    distribution at each position (harness/analysis/lossless_sampling.py). The (baseline,
    speculative) rows of one cell, with the speculative row's flags."""
    rb, rs = arm_row(identity, BASELINE, base), arm_row(identity, SPECULATIVE, spec)
    rs.speedup = metrics.speedup(rs.output_tok_per_s, rb.output_tok_per_s)
    rs.speedup_by_turn = turn_speedups(base, spec)
    if slo_bounds:
        fill_goodput(rb, base, slo_bounds)
        fill_goodput(rs, spec, slo_bounds)
    t = identity.temperature
    flags: list[str] = []
    if t == 0 or deterministic_verifier:
        flags += _lossless(rs, base, spec, t, noise_nats)
    if t > 0:
        flags += _sampling(rb, rs, sampling_samples, num_top_logprobs)
    if spec.counters.num_drafts == 0 and spec.num_output_tokens > 0:
        flags.append("ZERO DRAFTS: speculation was silently off in this cell")
    _prediction(rs, predicted_al, t)
    ctx = breakdown.CellContext(identity.k, train_context_len, end_think_id, k_sweep, interleaved)
    looping, beyond = breakdown.derive(rb, rs, base, spec, ctx)
    flags += breakdown.explained_gap(rs, mismatch_tolerance, looping, beyond)
    flags += _machine(rs, machine)
    flags += _content(identity.max_tokens, base, spec, ignore_eos, random_prompts)
    if spec.foreign_tokens > 0 or base.foreign_tokens > 0:
        flags.append("FOREIGN TRAFFIC: the server generated tokens for other clients during the cell")
    rs.flags = flags
    return rb, rs
