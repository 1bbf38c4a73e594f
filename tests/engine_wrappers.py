"""A real engine with one behaviour changed: fault injection at the edge, or an engine kept up
for another run (tests only)."""

from __future__ import annotations


class WrappedEngine:
    """Delegates everything to the real engine; subclasses override `generate`. Closing it
    closes the real engine."""

    def __init__(self, engine):
        self._e = engine
        self.kind = engine.kind

    def generate(self, requests, sampling, concurrency, timeout_s=None, **kwargs):
        return self._e.generate(requests, sampling, concurrency, timeout_s, **kwargs)  # arrivals too

    def __getattr__(self, name):
        return getattr(self._e, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._e.close()
