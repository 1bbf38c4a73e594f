"""`harness`'s entry point: run the typer app and turn whatever ends it into one line and an exit code.

Exit codes: 0 ok · 1 regression (gate) · 2 bad input or config · 3 infrastructure failure ·
4 internal error (traceback in a log) · 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import NoReturn

import typer

from harness import interrupts
from harness.cli.app import app
from harness.cli.common import stderr
from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_INTERNAL, EXIT_INTERRUPTED, HarnessError

# Signals that end the harness the way Ctrl-C does (finally blocks run, engines close, the manifest
# says interrupted), each with the shell's exit code 128 + signal number.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _on_terminate(signum, frame) -> None:
    if not interrupts.record(signum):  # already unwinding: let the cleanup finish
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _interrupted_exit() -> NoReturn:
    sig = interrupts.received()
    code = 128 + sig if sig else EXIT_INTERRUPTED
    stderr().print(
        f"[yellow]interrupted[/]{f' ({signal.Signals(sig).name})' if sig else ''}: "
        "finished work is kept; rerun the same command to resume"
    )
    sys.exit(code)


def _write_crash_log(exc: BaseException) -> Path | None:
    """The traceback of an unexpected error, in a file under $HARNESS_CACHE/crash/ (or None)."""
    import datetime as dt
    import traceback

    from harness.paths import cache_root

    root = cache_root() / "crash"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    try:
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{stamp}.log"
        path.write_text(f"$ harness {' '.join(sys.argv[1:])}\n" + "".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return None


def _error_line(message: str) -> None:
    """The one line of an error; its text is not markup (torch's "[enforce fail at ...]" would vanish)."""
    from rich.markup import escape

    stderr().print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _unexpected_exit(exc: BaseException) -> NoReturn:
    """Not a HarnessError: a full disk is infrastructure (3); anything else is a bug in the
    harness (4), never a code CI reads as a verdict. One line; the traceback goes to a log."""
    from harness.errors import DiskFull, is_disk_full

    if is_disk_full(exc):  # whatever the writer raised: OSError, torch's RuntimeError, safetensors'
        _error_line(DiskFull.from_exception(exc).message)
        sys.exit(EXIT_INFRA)
    log = _write_crash_log(exc)
    where = f"traceback in {log}" if log else "no traceback log could be written"
    stderr().print(
        f"[bold red]internal error:[/] {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
        f"({where}; please report it)",
        highlight=False,
        soft_wrap=True,
    )
    sys.exit(EXIT_INTERNAL)


def main() -> None:
    """Entry point: run the app; a HarnessError becomes one clear line and its exit code.
    Exit codes: docs in harness/errors.py (0 ok, 1 gate regression, 2 bad input, 3 infrastructure,
    4 internal error, 128 + signal when interrupted: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    interrupts.clear()
    previous = {s: signal.getsignal(s) for s in _TERMINATING}
    for s in _TERMINATING:
        if previous[s] != signal.SIG_IGN:  # nohup'd or deliberately ignored: keep it so
            signal.signal(s, _on_terminate)
    try:
        _run_app()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _run_app() -> None:
    try:
        # Non-standalone typer *returns* the exit code of Ctrl-C (130) and of typer.Exit.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            if code == EXIT_INTERRUPTED:
                _interrupted_exit()
            sys.exit(code)
    except HarnessError as e:
        _error_line(e.message)
        sys.exit(e.exit_code)
    except (typer.Exit, SystemExit) as e:
        code = getattr(e, "exit_code", getattr(e, "code", 0))
        sys.exit(code or 0)
    except BaseException as e:  # Ctrl-C (click turns it into Abort), click usage errors
        aborts, usage_errors = _click_exceptions()
        if isinstance(e, (KeyboardInterrupt, *aborts)):
            _interrupted_exit()
        if isinstance(e, usage_errors):
            e.show()  # type: ignore[attr-defined]  # a click usage error: the usage line and "Error: ...", as click prints it
            if getattr(e, "ctx", None) is None:  # e.g. an option missing its value: click prints no usage
                stderr().print(f"Try '{_command_words()} --help' for usage.", highlight=False)
            sys.exit(EXIT_BAD_INPUT)
        _unexpected_exit(e)


def _command_words() -> str:
    """`harness` and the (sub)command words the user typed, up to the first option or argument
    that is not a command name."""
    import typer.main

    words, cmd = ["harness"], typer.main.get_command(app)
    for arg in sys.argv[1:]:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            break
        words.append(arg)
        cmd = sub
    return " ".join(words)


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(abort, usage-error) exception classes of the click the installed typer parses with: typer
    >= 0.24 vendors click as `typer._click`, whose exceptions are not `click`'s, so both are named
    (a usage error caught as neither is reported as a bug, exit 4)."""
    aborts: list[type[BaseException]] = []
    usage: list[type[BaseException]] = []
    with contextlib.suppress(ImportError):
        from typer._click.exceptions import ClickException  # type: ignore[import-not-found]
        from typer.exceptions import Abort  # type: ignore[attr-defined]

        aborts.append(Abort)
        usage.append(ClickException)
    with contextlib.suppress(ImportError):
        import click

        aborts.append(click.exceptions.Abort)
        usage.append(click.exceptions.ClickException)
    return tuple(aborts), tuple(usage)
