"""Training prompts: the built-in set, a user JSONL file, or a Hugging Face dataset (online).

Training prompts must never be bench prompts (a draft trained on the test set reports an
acceptance no user will see): `check_bench_overlap` refuses any training prompt that equals,
contains or shares a 12-word run with a prompt of the recipe's bench suites.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import BadInput
from harness.prompts import PromptRecord, load_jsonl, normalize_text, parse_record
from harness.recipe import REPO_ROOT, Recipe

BUILTIN = REPO_ROOT / "train" / "prompts" / "builtin.jsonl"
NGRAM = 12


def load_hf_prompts(spec: str, field_map: dict[str, str], limit: int | None) -> list[PromptRecord]:
    """`hf:<dataset>[:<split>]` through `datasets` (needs the network)."""
    name, _, split = spec.removeprefix("hf:").partition(":")
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as e:  # noqa: BLE001 - any hub/network failure is the same advice
        raise BadInput(f"{spec}: cannot load Hugging Face dataset {name!r} ({type(e).__name__}: {e}); "
                       "online access is needed, or export it to JSONL and pass the file") from e
    out = []
    for i, row in enumerate(ds):
        if limit is not None and len(out) >= limit:
            break
        obj = {field_map.get(k, k): v for k, v in dict(row).items()}
        obj = {k: v for k, v in obj.items() if k in ("id", "prompt", "messages", "turns")}
        out.append(parse_record(obj, f"{spec}[{i}]", fallback_id=f"{name}-{i}"))
    return out


def load_training_prompts(recipe: Recipe, base: Path | None = None) -> list[PromptRecord]:
    t = recipe.train
    if t.prompts == "builtin":
        records = load_jsonl(BUILTIN)
    elif t.prompts.startswith("hf:"):
        records = load_hf_prompts(t.prompts, t.prompt_field_map, t.num_prompts)
    else:
        p = Path(t.prompts)
        if not p.is_absolute() and base is not None and (base / p).exists():
            p = base / p
        records = load_jsonl(p, t.prompt_field_map or None)
    if t.num_prompts is not None:
        records = records[: t.num_prompts]
    return records


def _ngrams(text: str) -> set[tuple[str, ...]]:
    words = normalize_text(text).split()
    return {tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


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
