"""Start an engine in a background thread while the caller starts another.

A vLLM-CPU server's start is mostly one core's work: three processes that each import vLLM in turn
(~34 s on the 2-core CI machine, docs/facts.md §3). Two starts side by side take about as long as
one (the killed-server test: 183 -> 149 s). Not so an offline engine: its host imported vLLM ahead,
and opening the engine is multi-threaded (two at once: 13.7 s, one after the other: 4.7 + 7.2 s).
On a GPU, two engines starting at once on the same devices race vLLM's memory profiling (each
reads free memory while the other allocates), so callers overlap starts on CPU only.

The engine's own ownership rules still hold (harness/engine/ownership.py): a server started from
this thread gets the process-group watchdog, which does not depend on the starting thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from harness.engine.base import Engine


class BackgroundStart:
    """`make()` running in a daemon thread. `result()` waits for it and hands the engine over (or
    raises its error); `abandon()` closes the engine whenever it is up, now or when its start ends,
    and drops a start error (the caller is already failing for its own reason)."""

    def __init__(self, make: Callable[[], Engine]):
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._error: BaseException | None = None
        self._abandoned = False
        self._thread = threading.Thread(target=self._run, args=(make,), name="engine-start", daemon=True)
        self._thread.start()

    def _run(self, make: Callable[[], Engine]) -> None:
        try:
            engine = make()
        except BaseException as e:  # noqa: BLE001 - handed to the caller by result()
            self._error = e
            return
        with self._lock:
            if not self._abandoned:
                self._engine = engine
                return
        engine.close()

    def result(self) -> Engine:
        self._thread.join()
        if self._error is not None:
            raise self._error
        with self._lock:
            engine, self._engine = self._engine, None
        assert engine is not None  # the thread ended without an error, so it made one
        return engine

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
