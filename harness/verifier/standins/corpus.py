"""Offline pretraining text for the stand-ins: Python's bundled documentation (pydoc_data).

It ships with every CPython, needs no network, and reads like English technical prose with code,
which is enough for a tiny model to produce language-like continuations.
"""

from __future__ import annotations

import hashlib


def corpus_topics() -> list[tuple[str, str]]:
    """(topic name, document) in a fixed order (sorted by topic name), so training is deterministic."""
    import pydoc_data.topics as topics

    return [(name, _normalize(topics.topics[name])) for name in sorted(topics.topics)]


def corpus_documents() -> list[str]:
    return [doc for _, doc in corpus_topics()]


def _normalize(doc: str) -> str:
    """Drop the reST indentation and blank lines (they would dominate a tiny model's output)."""
    return "\n".join(line.strip() for line in doc.splitlines() if line.strip())


def corpus_fingerprint() -> str:
    h = hashlib.sha256()
    for doc in corpus_documents():
        h.update(doc.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
