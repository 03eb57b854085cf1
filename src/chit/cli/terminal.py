"""What the CLI writes: data lines, the one-line error and the exit code of a failure.

Nothing here imports click (or logging): ``chit.cli.entry`` serves the plain read
commands without click (issue 9: a cold ``chit receipts`` ≤ 0.1 s), and its output, its
errors and their exit codes must be the click path's to the byte. So both paths write
through :func:`echo` and end a failed command through :func:`exit_for`.
"""

from __future__ import annotations

import codecs
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from chit.errors import ChitError, ExitCode

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TextIO


def echo(message: str, *, err: bool = False) -> None:
    """Write ``message`` and a newline on stdout (``err``: stderr), then flush.

    This is ``click.echo`` for a plain text stream, which is all chit writes to: click
    would write the same characters to the same stream. Where click would do more — no
    stream, a stream it re-wraps (no encoding or errors, or an ASCII one), a Windows
    console, an ANSI escape to strip — it is handed to click itself.
    """
    stream = sys.stderr if err else sys.stdout
    if "\x1b" in message or not _plain(stream):
        import click

        click.echo(message, err=err)
        return
    stream.write(message + "\n")
    stream.flush()


def _plain(stream: TextIO | None) -> bool:
    """Whether click would write to ``stream`` as it is (``click._compat``'s tests)."""
    if stream is None or sys.platform == "win32":
        return False
    encoding = getattr(stream, "encoding", None)
    if not encoding or getattr(stream, "errors", None) is None:
        return False
    try:
        return codecs.lookup(encoding).name != "ascii"
    except LookupError:
        return True


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs become a space, other control
    characters (terminal escapes included) and lone surrogates become ``\\xNN`` escapes."""
    out: list[str] = []
    for ch in " ".join(text.split()):
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000:
            out.append(f"\\x{code & 0xFF:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def fail(message: str, code: ExitCode, details: Sequence[str] = ()) -> NoReturn:
    """Print ``chit: message`` on stderr — one line, whatever it holds — and exit.

    Each of ``details`` (an error with several parts: every argument that does not fit
    a tool's schema) follows on a line of its own, indented, made one line the same way.
    Everything is redacted (``chit.redaction``): an unexpected error can quote what a
    server sent, task handle included.
    """
    from chit.redaction import redact

    echo(f"chit: {one_line(redact(message))}", err=True)
    for detail in details:
        echo(f"chit:   {one_line(redact(detail))}", err=True)
    sys.exit(int(code))


def exit_for(exc: BaseException) -> NoReturn:
    """End the command that raised ``exc``: one line and its exit code.

    A ``ChitError`` is the person's to read; Ctrl-C is their choice (130, as shells
    report SIGINT); a reader that went away (``chit receipts | head``) is not an error;
    anything else is a bug (exit 1, the traceback only with ``CHIT_DEBUG=1``, where
    ``exc`` is raised again). Called while ``exc`` is being handled.
    """
    if isinstance(exc, ChitError):
        fail(exc.message, exc.exit_code, exc.details)
    if isinstance(exc, KeyboardInterrupt):
        fail("interrupted", ExitCode.DETACHED)
    if isinstance(exc, BrokenPipeError):
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(int(ExitCode.OK))
    # sqlite3 is looked up, not imported: a command that raised its error loaded it.
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.OperationalError):
        fail(f"store error: {exc}", ExitCode.STORE)
    from chit.tasks.server.backend import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        # A server store (PostgreSQL) that is unreachable, or psycopg missing: the
        # environment, not a bug. Any command that opens one may meet it.
        fail(f"cannot open the store: {exc.reason}", ExitCode.STORE)
    if os.environ.get("CHIT_DEBUG"):
        raise exc
    fail(
        f"internal error: {type(exc).__name__}: {exc} (run with CHIT_DEBUG=1 for details)",
        ExitCode.INTERNAL,
    )
