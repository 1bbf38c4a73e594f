"""Terminating signals (SIGTERM, SIGHUP), received once and honoured at the next safe point.

The CLI's handler raises KeyboardInterrupt wherever the signal lands. Where that exception is
swallowed (raised inside a `__del__` or a weakref callback, which Python ignores, or caught by a
library's broad `except`), the run would go on as if nothing happened; so the long loops (bench
cells and arms, training stages) also call `check()` between units of work.
"""

from __future__ import annotations

import signal

_received: list[int] = []


def record(signum: int) -> bool:
    """Note a terminating signal; False when one was already noted (the run is unwinding)."""
    if _received:
        return False
    _received.append(signum)
    return True


def received() -> int | None:
    """The first terminating signal of this process's run, or None."""
    return _received[0] if _received else None


def clear() -> None:
    _received.clear()


def check() -> None:
    """Raise KeyboardInterrupt when a terminating signal was received: the run stops here even
    if the exception the handler raised was lost on the way."""
    if _received:
        raise KeyboardInterrupt(signal.Signals(_received[0]).name)
