"""Offline pretraining text for the stand-ins.

- `pydoc` (the default): Python's bundled documentation (pydoc_data). It ships with every CPython,
  needs no network, and reads like English technical prose with code, which is enough for a tiny
  model to produce language-like continuations; a stand-in pretrained on it answers every prompt
  with pydoc.
- `smollm2-answers`: a real chat model's answers, SmolLM2-135M-Instruct's greedy replies to the
  first built-in training prompts (train/prompts/builtin.jsonl), kept in the package
  (data/smollm2_answers.jsonl.gz) with the script that regenerates them
  (scripts/make_real_model_answers.py). A stand-in pretrained on it learns to answer a prompt as a
  chat model writes, in the stand-in's own architecture and formats (issue 51, part 4).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Literal

Corpus = Literal["pydoc", "smollm2-answers"]
ANSWERS_FILE = Path(__file__).parent / "data" / "smollm2_answers.jsonl.gz"


def corpus_topics(corpus: Corpus = "pydoc") -> list[tuple[str, str]]:
    """(title, document) in a fixed order, so training is deterministic: pydoc's (topic name,
    document) sorted by name, or (prompt, answer) in the answers file's order."""
    if corpus == "smollm2-answers":
        return list(_answers())
    import pydoc_data.topics as topics

    return [(name, _normalize(topics.topics[name])) for name in sorted(topics.topics)]


@cache
def _answers() -> tuple[tuple[str, str], ...]:
    with gzip.open(ANSWERS_FILE, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return tuple((r["prompt"], r["answer"]) for r in rows)


def corpus_documents(corpus: Corpus = "pydoc") -> list[str]:
    """The text the stand-in's tokenizer is trained on: the documents, and for answers the prompts too."""
    if corpus == "smollm2-answers":
        return [text for pair in _answers() for text in pair]
    return [doc for _, doc in corpus_topics(corpus)]


def _normalize(doc: str) -> str:
    """Drop the reST indentation and blank lines (they would dominate a tiny model's output)."""
    return "\n".join(line.strip() for line in doc.splitlines() if line.strip())


def corpus_fingerprint(corpus: Corpus = "pydoc") -> str:
    h = hashlib.sha256()
    for doc in corpus_documents(corpus):
        h.update(doc.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
