"""Long-document training prompts: passages of the offline corpus (Python's bundled docs, the text
the stand-ins pretrain on) with a summarize or answer-from-the-passage instruction, at lengths spread
evenly up to what the engine can serve (issue 26 item 2).

Why: a draft trained only on short prompts has never attended over a long context, and its
acceptance falls on long-context suites (`BEYOND TRAINING CONTEXT`; public threads report EAGLE-3
AL on Kimi-K2.5 falling from 2.3 at 2k context to 1.1 at 20k). The built-in training prompts stop
near 300 tokens; bench suites reach ~1,500 (qa_long). These prompts fill the lengths between, so the
draft's recorded training context covers the suites'.

Lengths are in the verifier's own tokens (rendered with its chat template), so they are exact for
any tokenizer: prompt i of n is cut to lo + (hi - lo) * i / (n - 1) tokens, hi the budget
engine.max_model_len - train.max_new_tokens.
"""

from __future__ import annotations

import random

from harness.prompts import PromptRecord, render

ID_PREFIX = "long-"
INSTRUCTIONS = (
    "Summarize the passage above in a few sentences.",
    "Using only the passage above, explain what it says about {topic}.",
    "List the main points of the passage above.",
    "According to the passage above, how does {topic} work?",
)
MIN_TOKENS = 128  # the shortest long document: the built-in prompts already cover below
CHARS_PER_TOKEN = 6  # a cut this short only costs another pass of the loop
MARGIN = 8  # decoding a cut and encoding it again can add a token or two at the seam


def target_lengths(n: int, hi: int, lo: int = MIN_TOKENS) -> list[int]:
    """n prompt lengths (tokens) spread evenly over [lo, hi], shortest first."""
    if n <= 0:
        return []
    lo = min(lo, hi)
    if n == 1:
        return [hi]
    return [round(lo + (hi - lo) * i / (n - 1)) for i in range(n)]


def _record(rid: str, text: str, template_kwargs: tuple) -> PromptRecord:
    return PromptRecord(rid, messages=({"role": "user", "content": text},), template_kwargs=template_kwargs)


def _render_len(tokenizer, text: str, template_kwargs: tuple) -> int:
    return len(render(tokenizer, _record("", text, template_kwargs)))


def long_document_prompts(
    tokenizer, n: int, max_prompt_tokens: int, seed: int = 0, template_kwargs: tuple = ()
) -> list[PromptRecord]:
    """n prompts whose rendered length (chat template included) is at most `max_prompt_tokens`,
    spread evenly from MIN_TOKENS up to it. Each is consecutive corpus documents from a seeded start,
    cut to its length at a token boundary, then an instruction naming the first document's topic."""
    from harness.verifier.standins.corpus import corpus_topics

    docs = corpus_topics()
    rng = random.Random(seed)
    out = []
    for i, target in enumerate(target_lengths(n, max_prompt_tokens - MARGIN)):
        start = rng.randrange(len(docs))
        topic = docs[start][0].replace("-", " ")  # pydoc topic keys: "operator-summary"
        instruction = INSTRUCTIONS[i % len(INSTRUCTIONS)].format(topic=topic)
        overhead = _render_len(tokenizer, "\n\n" + instruction, template_kwargs)
        ids: list[int] = []
        j = start
        while len(ids) < target - overhead and j < start + len(docs):
            need = target - overhead - len(ids)  # a document can be 17k tokens: encode what can fit
            # verbose=False: the cut below sizes it, past the tokenizer's model_max_length on purpose
            text = docs[j % len(docs)][1][: CHARS_PER_TOKEN * need] + "\n"
            ids += tokenizer.encode(text, add_special_tokens=False, verbose=False)
            j += 1
        passage = tokenizer.decode(ids[: max(1, target - overhead)], skip_special_tokens=True).strip()
        text = f"{passage}\n\n{instruction}"
        while _render_len(tokenizer, text, template_kwargs) > max_prompt_tokens and " " in passage:
            passage = passage.rsplit(" ", 1)[0]  # the seam re-encoded longer: drop words until it fits
            text = f"{passage}\n\n{instruction}"
        out.append(_record(f"{ID_PREFIX}{i + 1:05d}", text, ()))
    return out
