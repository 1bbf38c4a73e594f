"""Training prompts: the built-in set, a user JSONL file, or a Hugging Face dataset (online).

Training prompts must never be bench prompts (a draft trained on the test set reports an
acceptance no user will see): `check_bench_overlap` refuses any training prompt that equals,
contains or shares a 12-word run with a prompt of the recipe's bench suites.
"""

from __future__ import annotations

from pathlib import Path

from harness.paths import BUILTIN_TRAIN_PROMPTS as BUILTIN
from harness.prompts import PromptRecord, load_hf_prompts, load_jsonl, normalize_text
from harness.recipe import Recipe

NGRAM = 12


def load_training_prompts(recipe: Recipe) -> list[PromptRecord]:
    t = recipe.train
    if t.prompts == "builtin":
        records = load_jsonl(BUILTIN)
    elif t.prompts.startswith("hf:"):
        records = load_hf_prompts(t.prompts, t.prompt_field_map, t.num_prompts)
    else:
        records = load_jsonl(Path(t.prompts), t.prompt_field_map or None)
    if t.num_prompts is not None:
        records = records[: t.num_prompts]
    return records


def _ngrams(text: str) -> set[tuple[str, ...]]:
    words = normalize_text(text).split()
    return {tuple(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def check_bench_overlap(train: list[PromptRecord], bench: dict[str, list[PromptRecord]]) -> list[str]:
    """Training prompt ids that overlap a bench prompt (as 'train-id ~ suite/bench-id')."""
    bench_texts: list[tuple[str, str, str]] = []
    grams: dict[tuple[str, ...], str] = {}
    for suite, recs in bench.items():
        for r in recs:
            for u in r.user_texts():
                n = normalize_text(u)
                bench_texts.append((f"{suite}/{r.id}", n, u))
                for g in _ngrams(u):
                    grams.setdefault(g, f"{suite}/{r.id}")
    hits = []
    for r in train:
        for u in r.user_texts():
            n = normalize_text(u)
            hit = next((bid for bid, bn, _ in bench_texts if bn and (bn in n or n in bn)), None)
            if hit is None:
                hit = next((grams[g] for g in _ngrams(u) if g in grams), None)
            if hit:
                hits.append(f"{r.id} ~ {hit}")
                break
    return hits
