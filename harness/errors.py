"""The one project exception type and the exit codes that are the CI contract.

Exit codes: 0 ok · 1 regression found by the gate (and nothing else) · 2 bad input or config ·
3 infrastructure failure (server did not start, timeout, disk full) · 4 internal error (a bug: the
traceback is in a log file) · 128 + signal when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
CI may retry 3 and must fail on 1.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM and SIGHUP exit 128 + their number


class HarnessError(Exception):
    """An error the user can act on: one line saying what is wrong and how to fix it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadInput(HarnessError):
    """Malformed or missing input: a checkpoint, recipe, prompt file or run folder."""

    exit_code = EXIT_BAD_INPUT


class InfraError(HarnessError):
    """The machinery failed: a server did not start, a request timed out, a process died."""

    exit_code = EXIT_INFRA


class Regression(HarnessError):
    """The gate found a regression."""

    exit_code = EXIT_REGRESSION
