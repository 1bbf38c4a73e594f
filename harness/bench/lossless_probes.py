"""What the lossless checks ask of the baseline engine beyond a cell's arms: at T = 0 its own
numeric noise on the cell's prompts (a miss within it is numerics, harness/analysis/lossless.py),
at T > 0 the re-scoring of both arms' outputs that the distribution test compares them with
(harness/analysis/lossless_sampling.py)."""

from __future__ import annotations

from harness.bench.arm import run_arm
from harness.bench.planning import Prompts
from harness.bench.rows import ArmResult
from harness.engine.base import Engine, Rescorer, Sampling


def engine_noise(
    engine: Engine,
    tokenizer,
    prompts: Prompts,
    sampling: Sampling,
    max_tokens: int,
    concurrency: int,
    max_prompt: int,
    base: ArmResult,
) -> float | None:
    """The baseline engine's own numeric jitter on these prompts: the baseline arm again at
    another batch shape (concurrency 1, or all prompts at once when the cell ran at 1), compared
    with the measured baseline arm (harness.analysis.lossless.noise_margin). Run only when a
    T = 0 cell has a miss; None without logprobs."""
    from harness.analysis.lossless import noise_margin

    if sampling.logprobs is None or not base.logprobs:
        return None
    again = ArmResult()
    other = 1 if concurrency > 1 else max(2, len(prompts))
    run_arm(engine, tokenizer, prompts, sampling, max_tokens, other, max_prompt, again)
    ids = sorted(set(base.logprobs) & set(again.logprobs))
    return noise_margin(
        [(base.outputs[i], base.logprobs[i]) for i in ids], [(again.outputs[i], again.logprobs[i]) for i in ids]
    )


def rescored_arms(
    base_engine: Engine, prompts: Prompts, arms: tuple[ArmResult, ArmResult], sampling: Sampling, num_top: int
) -> tuple[list, list] | None:
    """For the T > 0 test: each arm's first-turn outputs with the verifier's sampling distribution
    at every output position, from the no-speculation engine re-scoring prompt + output, kept as
    `num_top` buckets (a `RescoredArms`, whose `rescore` the rows keep as sampling_rescore). At
    T = 1 without top-p the raw distribution is the sampling one: the engine returns its top
    tokens and the output's. Otherwise a `SamplingRescorer` (the offline engine) applies
    temperature and top-p in vLLM's worker and returns the same few numbers; any other
    `Rescorer` (a server) returns the whole vocabulary per position, processed here. Top tokens
    come with RESCORE_MARGIN more, for ties. None when the engine is no `Rescorer`
    (harness/engine/base.py) or the test is off (bench.lossless_logprobs = 0)."""
    from harness.analysis.lossless_sampling import RESCORE_MARGIN, RescoredArms, raw_is_sampling, rescored_samples
    from harness.engine.base import RESCORE_RAW_TOP, RESCORE_WHOLE_VOCABULARY, SamplingRescorer

    if num_top <= 0 or not isinstance(base_engine, Rescorer):
        return None
    t, top_p, top = sampling.temperature, sampling.top_p, num_top + RESCORE_MARGIN
    out, paths = [], []
    for arm in arms:
        ids = [(list(p_ids), arm.outputs[f"{rec.id}#0"]) for rec, p_ids in prompts if f"{rec.id}#0" in arm.outputs]
        seqs = [(p + o, len(p)) for p, o in ids]
        if raw_is_sampling(t, top_p):
            dists, path, is_sampling = base_engine.rescore(seqs, top), RESCORE_RAW_TOP, True
        elif isinstance(base_engine, SamplingRescorer):
            res = base_engine.rescore_sampling(seqs, t, top_p, top)
            dists, path, is_sampling = res.dists, res.path, True
        else:
            dists, path, is_sampling = base_engine.rescore(seqs, None), RESCORE_WHOLE_VOCABULARY, False
        out.append(rescored_samples([o for _, o in ids], dists, t, top_p, num_top, is_sampling))
        paths.append(path)
    return RescoredArms(out[0], out[1], "; ".join(dict.fromkeys(paths)))
