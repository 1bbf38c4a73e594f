"""What the T > 0 re-score costs, per 1,000 positions: the whole-vocabulary path (vLLM returns every
token's logprob at every position; the harness applies temperature and top-p) beside the
in-engine path (temperature and top-p applied in vLLM's worker, top N + margin and the token
returned: harness/engine/sampling_logits.py), at the Kimi stand-in's vocabulary (2,048) and at
Kimi-K2.5's (163,840).

    .venv/bin/python bench/rescore_cost.py [--vocabs 2048 163840] [--wide-cap 8]

Sequences: the Kimi stand-in's own samples (T = 0.8, top-p 0.9) of a few prompts, prompt +
output (token ids < 2,048, the tokenizer's size, for both models). vLLM re-scores every position
of prompt + output (prompt_logprobs has no start), so the cost is per position vLLM returns.
The 163,840-token model is the Kimi stand-in's architecture with that vocabulary, built by the
stand-in code path (spec_for(vocab_size=163840), hf_text_config_dict, write_checkpoint) but
*untrained*: the builder's bigram initialisation needs a V x V count matrix (163,840^2 floats,
~107 GB), and pretraining that head on 2 cores is beside the point of a cost measurement. Its
tokenizer is the 2,048-token stand-in's. There the whole-vocabulary path runs only on the first
`--wide-cap` positions of one sequence (it takes seconds per position) and its figure is that
time scaled to 1,000 positions (stated in the output).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPTS = (
    "What is a for loop?",
    "Explain exceptions in Python.",
    "Write a haiku about the sea.",
    "How do I sort a list?",
)
TEMPERATURE, TOP_P, NUM_TOP = 0.8, 0.9, 5


def wide_vocab_model(vocab: int, tokenizer_from: Path) -> Path:
    """The Kimi stand-in's architecture with `vocab` tokens, untrained (module doc), cached."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.provenance import atomic_dir
    from harness.verifier.hf_text import hf_text_config
    from harness.verifier.standins.build import cache_root, write_checkpoint
    from harness.verifier.standins.corpus import corpus_fingerprint
    from harness.verifier.standins.specs import hf_text_config_dict, spec_for

    spec = spec_for("kimi-k2.5", vocab_size=vocab, pretrain_steps=0)
    final = cache_root() / "rescore-bench" / f"kimi-k2.5-v{vocab}-untrained-{spec.fingerprint(corpus_fingerprint())}"
    if (final / "config.json").is_file():
        return final
    with atomic_dir(final) as tmp:
        torch.manual_seed(spec.seed)
        model = AutoModelForCausalLM.from_config(hf_text_config(hf_text_config_dict(spec)), dtype=torch.float32)
        write_checkpoint(spec, model, tmp)
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            if (tokenizer_from / name).is_file():
                shutil.copy(tokenizer_from / name, tmp / name)
    return final


def engine_for(path: Path):
    from harness.engine.offline import OfflineEngine
    from harness.engine.settings import engine_plan
    from harness.recipe import EngineSettings
    from harness.verifier.layout import resolve_layout

    return OfflineEngine(engine_plan(EngineSettings(max_model_len=512), resolve_layout(path)))


def sampled_sequences(engine, tokenizer, max_tokens: int) -> list[tuple[list[int], int]]:
    from harness.engine.base import GenRequest, Sampling

    reqs = [
        GenRequest(
            f"p{i}",
            tuple(
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": p}], tokenize=True, add_generation_prompt=True, return_dict=False
                )
            ),
            max_tokens,
        )
        for i, p in enumerate(PROMPTS)
    ]
    res = engine.generate(reqs, Sampling(temperature=TEMPERATURE, top_p=TOP_P, seed=0), concurrency=len(reqs))
    return [(list(r.prompt_token_ids) + o.output_token_ids, len(r.prompt_token_ids)) for r, o in zip(reqs, res.outputs)]


def whole_vocabulary(engine, seqs) -> tuple[float, float]:
    """(engine seconds, harness seconds) of today's path: every token's raw logprob, processed here."""
    from harness.analysis.lossless_sampling import rescored_samples

    t0 = time.perf_counter()
    dists = engine.rescore(seqs, None)
    t1 = time.perf_counter()
    rescored_samples([ids[s:] for ids, s in seqs], dists, TEMPERATURE, TOP_P, NUM_TOP)
    return t1 - t0, time.perf_counter() - t1


def in_engine(engine, seqs) -> tuple[float, float]:
    """(engine seconds, harness seconds) of the in-engine path (harness/engine/sampling_logits.py)."""
    from harness.analysis.lossless_sampling import RESCORE_MARGIN, rescored_samples
    from harness.engine.base import RESCORE_IN_ENGINE

    t0 = time.perf_counter()
    res = engine.rescore_sampling(seqs, TEMPERATURE, TOP_P, NUM_TOP + RESCORE_MARGIN)
    t1 = time.perf_counter()
    assert res.path == RESCORE_IN_ENGINE, res.path
    rescored_samples([ids[s:] for ids, s in seqs], res.dists, TEMPERATURE, TOP_P, NUM_TOP, is_sampling=True)
    return t1 - t0, time.perf_counter() - t1


def positions(seqs) -> int:
    return sum(len(ids) - 1 for ids, _ in seqs)  # vLLM's prompt logprobs: every position but the first


def measure(engine, seqs, wide_seqs, repeats: int) -> dict[str, tuple[float, float, int]]:
    """Path -> (engine s per 1,000 positions, harness s per 1,000, positions timed); median of `repeats`."""
    out = {}
    for name, fn, s in (("whole vocabulary", whole_vocabulary, wide_seqs), ("in-engine", in_engine, seqs)):
        fn(engine, [(s[0][0][:4], 1)])  # warm the path
        runs = [fn(engine, s) for _ in range(repeats)]
        n = positions(s)
        out[name] = (
            1000 * statistics.median(r[0] for r in runs) / n,
            1000 * statistics.median(r[1] for r in runs) / n,
            n,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocabs", type=int, nargs="+", default=[2048, 163840])
    ap.add_argument("--max-tokens", type=int, default=96, help="sampled output tokens per prompt")
    ap.add_argument("--wide-cap", type=int, default=8, help="positions of the whole-vocabulary path above 2,048")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from harness.engine.offline import shutdown_hosts
    from harness.verifier.standins.build import ensure_standin
    from harness.verifier.standins.specs import spec_for

    standin = ensure_standin(spec_for("kimi-k2.5"))
    tokenizer = AutoTokenizer.from_pretrained(standin)
    rows = []
    try:
        with engine_for(standin) as eng:
            seqs = sampled_sequences(eng, tokenizer, args.max_tokens)
            if 2048 in args.vocabs:
                rows.append((2048, measure(eng, seqs, seqs, args.repeats), False))
        for vocab in (v for v in args.vocabs if v != 2048):
            with engine_for(wide_vocab_model(vocab, standin)) as eng:
                capped = [(seqs[0][0][: args.wide_cap + 1], 1)]
                rows.append((vocab, measure(eng, seqs, capped, 1), True))
    finally:
        shutdown_hosts()
    print(
        f"T = {TEMPERATURE}, top-p = {TOP_P}, N = {NUM_TOP}; seconds per 1,000 re-scored positions (engine + harness)"
    )
    print(f"{'vocab':>8}  {'path':<17} {'engine':>9} {'harness':>9} {'total':>9}  positions timed")
    for vocab, res, capped in rows:
        for name, (e, h, n) in res.items():
            note = " (extrapolated to 1,000)" if capped and name == "whole vocabulary" else ""
            print(f"{vocab:>8}  {name:<17} {e:>9.2f} {h:>9.2f} {e + h:>9.2f}  {n}{note}")
        whole, fast = res["whole vocabulary"], res["in-engine"]
        print(f"{vocab:>8}  in-engine is {(whole[0] + whole[1]) / (fast[0] + fast[1]):.0f}x faster")


if __name__ == "__main__":
    main()
