"""One arm on one engine: every prompt of a suite sent at the cell's concurrency (multi-turn
records in rounds, answers fed back; open-loop on a seeded arrival schedule when the cell has a
request rate), each finished request collected into the arm's `ArmResult`. Also the sampling
settings both arms of a cell share, and the unmeasured warm-up before an engine's first arm."""

from __future__ import annotations

import uuid

from harness import metrics
from harness.bench.breakdown import RepeatRecord
from harness.bench.planning import Prompts
from harness.bench.rows import ArmResult
from harness.engine.base import Arrivals, BatchResult, Engine, GenOutput, GenRequest, Sampling
from harness.prompts import end_think_token, render, with_answer
from harness.recipe import Recipe
from harness.schema_requests import RequestRecord
from harness.verifier.layout import VerifierLayout


def sampling_for(recipe: Recipe, temperature: float, layout: VerifierLayout) -> Sampling:
    # At T = 0 both arms return the verifier's top-N logprobs, so a miss can be located and its
    # margin read (harness/analysis/lossless.py); at T > 0 the reference is a re-score by the
    # baseline engine instead (rescored_arms). Off with bench.lossless_logprobs = 0.
    n = recipe.bench.lossless_logprobs
    return Sampling(
        temperature=temperature,
        top_p=recipe.bench.top_p if temperature > 0 else 1.0,
        seed=recipe.engine.seed,
        ignore_eos=recipe.bench.ignore_eos,
        stop_token_ids=tuple(layout.eos_token_ids),
        logprobs=n if temperature == 0 and n > 0 else None,
    )


def _turn_requests(
    tokenizer,
    prompts: Prompts,
    turn: int,
    histories: dict[str, list[dict[str, str]]],
    max_tokens: int,
    max_prompt: int,
    fresh_prefix: bool = False,
) -> tuple[list[GenRequest], list]:
    """The requests of one round: first turns as rendered, later turns with the answers fed back;
    `fresh_prefix`: each with a cache salt of its own (no prefix-cache reuse)."""
    reqs, sent = [], []
    for rec, ids in prompts:
        if turn >= rec.num_turns:
            continue
        msgs = rec.first_messages()
        if turn > 0:
            if rec.id not in histories:
                continue  # an earlier turn failed
            assert rec.turns is not None  # turn < num_turns with turn > 0: a multi-turn record
            msgs = histories[rec.id] + [{"role": "user", "content": rec.turns[turn]}]
            ids = render(tokenizer, rec, msgs)
            if len(ids) > max_prompt:
                continue  # the conversation outgrew the context: it ends here
        salt = f"nocache-{uuid.uuid4().hex}" if fresh_prefix else None
        reqs.append(GenRequest(f"{rec.id}#{turn}", tuple(ids), max_tokens, salt))
        sent.append((rec, msgs))
    return reqs, sent


def run_arm(
    engine: Engine,
    tokenizer,
    prompts: Prompts,
    sampling: Sampling,
    max_tokens: int,
    concurrency: int,
    max_prompt: int,
    acc: ArmResult,
    arrivals: Arrivals | None = None,
    fresh_prefix: bool = False,
    repeat: int | None = None,
) -> None:
    """One repeat of one arm: all prompts, multi-turn records in rounds (answers fed back); with
    `arrivals`, each round sent open-loop on the same seeded schedule (both arms alike); with
    `fresh_prefix`, no request reuses another's cached prompt blocks. `repeat`: the repeat's index
    when the arm's prompts come in several batches (a sequential cell's rounds), else the next one."""
    histories: dict[str, list[dict[str, str]]] = {}
    end_think = end_think_token(tokenizer)  # once per arm: answers fed back end their thinking there
    wall, tokens = 0.0, 0
    repeat, done = len(acc.repeats) if repeat is None else repeat, []
    for turn in range(max(r.num_turns for r, _ in prompts)):
        reqs, sent = _turn_requests(tokenizer, prompts, turn, histories, max_tokens, max_prompt, fresh_prefix)
        if not reqs:
            break
        # arrivals only when open-loop: engines and test wrappers without the parameter keep working
        res: BatchResult = (
            engine.generate(reqs, sampling, concurrency, arrivals=arrivals)
            if arrivals
            else engine.generate(reqs, sampling, concurrency)
        )
        wall += res.wall_s
        tokens += res.num_output_tokens
        acc.counters = acc.counters + res.counters
        if res.generation_tokens is not None:
            acc.foreign_tokens += res.generation_tokens - res.num_output_tokens
        _add_at(acc.tokens_wall_by_turn, turn, (res.num_output_tokens, res.wall_s))
        if res.prefix_cache is not None:
            _add_at(acc.prefix_cache_by_turn, turn, res.prefix_cache)
        for (rec, msgs), o in zip(sent, res.outputs, strict=True):
            collect_output(acc, o, repeat)
            done += [o] if o.ok else []
            if rec.turns and o.ok:
                thinking = dict(rec.template_kwargs).get("thinking") is not False
                histories[rec.id] = with_answer(tokenizer, msgs, o.output_token_ids, end_think if thinking else None)
    acc.wall_s += wall
    acc.num_output_tokens += tokens
    acc.repeats.append(
        RepeatRecord(
            tokens,
            wall,
            tuple(o.request_id for o in done),
            tuple(len(o.output_token_ids) for o in done),
            tuple(o.latency_s or 0.0 for o in done),
        )
    )
    if wall > 0:
        acc.tok_s_repeats.append(tokens / wall)


def _add_at(per_turn: list[list[float]], turn: int, values: tuple[float, float]) -> None:
    """Add a round's pair of figures to its turn's running sums."""
    while len(per_turn) <= turn:
        per_turn.append([0.0, 0.0])
    per_turn[turn][0] += values[0]
    per_turn[turn][1] += values[1]


def request_record(o: GenOutput, repeat: int) -> RequestRecord:
    """What the breakdowns keep of a finished request (vLLM's per-step arrays when it gave them)."""
    spec = o.spec  # None: no speculation (the baseline arm), or a failed request
    return RequestRecord(
        request_id=o.request_id,
        repeat=repeat,
        prompt_tokens=o.prompt_len,
        output_token_ids=tuple(o.output_token_ids),
        latency_s=o.latency_s,
        accepted=spec.per_step_accepted if spec else (),
        drafted=spec.per_step_drafted if spec else (),
        num_spec_tokens=spec.num_spec_tokens if spec else None,
        steps=bool(spec.per_step_accepted) or not spec.num_spec_steps if spec else False,
        finish_reason=o.finish_reason,
        ttft_s=o.ttft_s,
        sent_s=o.sent_s,
        queue_s=o.queue_s,
    )


def collect_output(acc: ArmResult, o: GenOutput, repeat: int = 0) -> None:
    acc.num_requests += 1
    if not o.ok:
        acc.errors.append(f"{o.request_id}: {o.error}")
        return
    acc.outputs.setdefault(o.request_id, o.output_token_ids)
    if o.logprobs is not None:
        acc.logprobs.setdefault(o.request_id, o.logprobs)
    acc.requests.append(request_record(o, repeat))
    if o.ttft_s is not None:
        acc.ttft.append(o.ttft_s * 1000)
    if o.itl_s:
        acc.itl += [x * 1000 for x in o.itl_s]
        acc.itl_per_token += [x * 1000 for x in metrics.per_token_itl(o.itl_s, o.itl_tokens)]
    if o.latency_s:
        acc.e2e.append(o.latency_s * 1000)
    if o.latency_s and o.ttft_s is not None and len(o.output_token_ids) > 1:
        acc.tpot.append((o.latency_s - o.ttft_s) * 1000 / (len(o.output_token_ids) - 1))
    if o.spec is not None:
        drafts = o.spec.num_spec_steps or 0
        accepted = o.spec.num_accepted_draft_tokens or 0
        acc.per_request.append((accepted, drafts))
        if drafts:
            acc.per_request_al.append(1 + accepted / drafts)


def warm_up(engine: Engine, prompts: Prompts, recipe: Recipe, layout: VerifierLayout) -> None:
    """Unmeasured requests under each temperature's sampling settings: the first request that asks
    for logprobs (or samples) pays a one-time cost in vLLM (measured: +2-4 s on the first arm
    when the warm-up asked for neither, which read as a 1.0x random draft)."""
    n = recipe.bench.warmup_requests
    if n <= 0:
        return
    temps = sorted(set(recipe.bench.temperature) | {x.temperature for x in recipe.bench.extra_cells})
    for t in temps:
        reqs = [
            GenRequest(f"warmup-t{t:g}-{i}", tuple(prompts[i % len(prompts)][1]), min(16, recipe.bench.max_tokens))
            for i in range(n)
        ]
        engine.generate(reqs, sampling_for(recipe, t, layout), max(recipe.bench.concurrency))
