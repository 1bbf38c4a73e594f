"""One bench cell through the harness vs the same workload through vLLM's own benchmark client.

    .venv/bin/python bench/compare_with_vllm.py [--draft DIR] [--suite code] [--concurrency 4]

Starts one vLLM server (the recipe's verifier; speculative when --draft is given), then runs,
interleaved and repeated, (a) the harness's server engine on one suite and (b) vLLM's
`vllm.benchmarks.serve.benchmark()` with its stock OpenAI-completions client on the *same*
token prompts, max tokens, sampling (T=0, ignore_eos so both generate the same number of
tokens) and concurrency. Prints both output tokens/s and their ratio (target: within 1 %).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def vllm_stock(url: str, model: str, prompts: list[list[int]], max_tokens: int, concurrency: int) -> float:
    from vllm.benchmarks.datasets import SampleRequest
    from vllm.benchmarks.serve import TaskType, benchmark

    reqs = [SampleRequest(prompt=p, prompt_len=len(p), expected_output_len=max_tokens) for p in prompts]
    with contextlib.redirect_stdout(io.StringIO()):
        res = asyncio.run(
            benchmark(
                task_type=TaskType.GENERATION,
                endpoint_type="openai",
                api_url=url + "/v1/completions",
                base_url=url,
                model_id=model,
                model_name=model,
                tokenizer=None,
                input_requests=reqs,
                logprobs=None,
                request_rate=float("inf"),
                burstiness=1.0,
                disable_tqdm=True,
                num_warmups=0,
                profile=False,
                selected_percentile_metrics=["ttft", "tpot", "itl"],
                selected_percentiles=[50.0],
                ignore_eos=True,
                goodput_config_dict={},
                max_concurrency=concurrency,
                lora_modules=None,
                extra_headers=None,
                extra_body={"temperature": 0.0},
                ready_check_timeout_sec=0,
            )
        )
    return res["output_throughput"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=None)
    ap.add_argument("--draft", type=Path, default=None)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--suite", default="code")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    from harness.bench.arm import run_arm
    from harness.bench.planning import render_requests
    from harness.bench.rows import ArmResult
    from harness.draft.verifier import load_tokenizer, resolve_verifier
    from harness.engine.base import Sampling
    from harness.engine.server import ServerEngine
    from harness.engine.settings import SpeculativeSpec, engine_plan
    from harness.recipe import load_recipe
    from harness.suites import load_suite

    recipe = load_recipe(a.recipe)
    layout = resolve_verifier(recipe)
    tok = load_tokenizer(layout)
    suite = load_suite(a.suite, a.num_prompts)
    max_prompt = recipe.engine.max_model_len - a.max_tokens
    prompts = render_requests(tok, suite, max_prompt)
    # first turns only: vLLM's client has no multi-turn loop
    prompts = [
        (r.__class__(r.id, messages=tuple(r.first_messages() or ())) if r.turns else r, ids) for r, ids in prompts
    ]
    spec = SpeculativeSpec("eagle3", a.k, str(a.draft)) if a.draft else None
    plan = engine_plan(recipe.engine, layout, spec)
    sampling = Sampling(temperature=0.0, ignore_eos=True)
    harness_tps, vllm_tps = [], []
    with ServerEngine(plan, Path("results") / "bench-logs" / "compare_with_vllm.log") as eng:
        run_arm(eng, tok, prompts, sampling, a.max_tokens, a.concurrency, max_prompt, ArmResult())  # warm-up
        for _ in range(a.repeats):
            arm = ArmResult()
            run_arm(eng, tok, prompts, sampling, a.max_tokens, a.concurrency, max_prompt, arm)
            harness_tps.append(arm.num_output_tokens / arm.wall_s)
            vllm_tps.append(
                vllm_stock(eng.url, eng.model_name, [ids for _, ids in prompts], a.max_tokens, a.concurrency)
            )
    h, v = statistics.median(harness_tps), statistics.median(vllm_tps)
    # Each repeat runs the two clients back to back against the same server, so the paired
    # ratio cancels slow drifts of a shared machine; its spread is the measurement's noise.
    paired = sorted(x / y for x, y in zip(harness_tps, vllm_tps))
    print(
        f"cell: suite={suite.name} prompts={len(prompts)} max_tokens={a.max_tokens} concurrency={a.concurrency} "
        f"{'eagle3 k=' + str(a.k) if spec else 'no speculation'} (T=0, ignore_eos), {a.repeats} interleaved repeats"
    )
    print(f"harness  output tok/s: {h:8.1f}   (repeats: {', '.join(f'{x:.1f}' for x in harness_tps)})")
    print(f"vLLM     output tok/s: {v:8.1f}   (repeats: {', '.join(f'{x:.1f}' for x in vllm_tps)})")
    print(f"ratio harness / vLLM : {h / v:8.3f}   (of medians; target: within 1 %)")
    print(
        f"paired ratios        : median {statistics.median(paired):.3f}, range {paired[0]:.3f}-{paired[-1]:.3f} "
        f"over {len(paired)} repeats (the spread is this machine's run-to-run noise)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
