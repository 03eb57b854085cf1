"""The ``chit`` command: a click group whose commands live in sibling modules.

stdout carries data only; errors are one line on stderr with a stable exit code
(``chit.errors.ExitCode``). Tracebacks are shown only with ``CHIT_DEBUG=1``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from chit import __version__
from chit.errors import ChitError, ExitCode
from chit.inputs import first_surrogate


class ChitGroup(click.Group):
    """A click group that maps chit errors to one stderr line and an exit code.

    click's own errors are reported the same way: a usage error is one line and exit 2
    (click prints three: usage, a hint and the error), and an argument that is not valid
    UTF-8 is refused before any command sees it.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; with ``standalone_mode`` (the default) exit when done."""
        argv = list(sys.argv[1:] if args is None else args)
        logging.lastResort = TerminalLog(logging.WARNING)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, False, **extra)
        for position, arg in enumerate(argv, start=1):
            bad = first_surrogate(arg)
            if bad is not None:
                fail(
                    f"argument {position} is not valid UTF-8 (it holds byte "
                    f"0x{ord(bad) & 0xFF:02x}); pass text in UTF-8",
                    ExitCode.USAGE,
                )
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            # A group named without a command (``chit servers``): its help, not an error.
            click.echo(exc.format_message(), err=True)
            sys.exit(int(ExitCode.USAGE))
        except click.UsageError as exc:
            fail(usage_line(exc), ExitCode.USAGE)
        except click.ClickException as exc:  # e.g. a click.File that cannot be opened
            fail(exc.format_message(), ExitCode.USAGE)
        except click.exceptions.Abort:  # Ctrl-C (or end of input) at a click prompt
            fail("interrupted", ExitCode.DETACHED)
        # Commands return None; an int is click's own exit code (--help, --version).
        sys.exit(code if isinstance(code, int) else int(ExitCode.OK))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            super().invoke(ctx)
            return None  # see main(): only click's Exit yields an exit code
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except ChitError as exc:
            fail(exc.message, exc.exit_code, exc.details)
        except sqlite3.OperationalError as exc:
            fail(f"store error: {exc}", ExitCode.STORE)
        except KeyboardInterrupt:
            # Ctrl-C is the person's choice, not a bug (1): 130, as shells report SIGINT.
            fail("interrupted", ExitCode.DETACHED)
        except BrokenPipeError:
            # The reader went away (``chit receipts | head``): not an error. Point stdout
            # at /dev/null so the interpreter's final flush does not fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(int(ExitCode.OK))
        except Exception as exc:  # a bug: keep the terminal clean, offer the details
            from chit.tasks.server.backend import StoreUnavailable

            if isinstance(exc, StoreUnavailable):
                # A server store (PostgreSQL) that is unreachable, or psycopg missing: the
                # environment, not a bug. Any command that opens one may meet it.
                fail(f"cannot open the store: {exc.reason}", ExitCode.STORE)
            if os.environ.get("CHIT_DEBUG"):
                raise
            fail(
                f"internal error: {type(exc).__name__}: {exc} (run with CHIT_DEBUG=1 for details)",
                ExitCode.INTERNAL,
            )


class TerminalLog(logging.Handler):
    """Log records that reach no configured handler: one ``chit: warning: …`` line each.

    Installed as :data:`logging.lastResort`, which Python already uses when nothing else
    handles a record — it printed the message and a full traceback; this prints one
    escaped line (the traceback only with ``CHIT_DEBUG=1``). The stream is looked up at
    each record, so a TUI that captures ``sys.stderr`` captures these too.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"chit: {record.levelname.lower()}: {one_line(record.getMessage())}"
            if record.exc_info and os.environ.get("CHIT_DEBUG"):
                text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            sys.stderr.write(text + "\n")
        except Exception:
            self.handleError(record)


def fail(message: str, code: ExitCode, details: Sequence[str] = ()) -> NoReturn:
    """Print ``chit: message`` on stderr — one line, whatever it holds — and exit.

    Each of ``details`` (an error with several parts: every argument that does not fit
    a tool's schema) follows on a line of its own, indented, made one line the same way.
    Everything is redacted (``chit.redaction``): an unexpected error can quote what a
    server sent, task handle included.
    """
    from chit.redaction import redact

    click.echo(f"chit: {one_line(redact(message))}", err=True)
    for detail in details:
        click.echo(f"chit:   {one_line(redact(detail))}", err=True)
    sys.exit(int(code))


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


def usage_line(exc: click.UsageError) -> str:
    """click's usage error as one line, pointing at the command's ``--help``."""
    where = exc.ctx.command_path if exc.ctx is not None else "chit"
    message = exc.format_message().rstrip(".")
    if message and message[0].isupper() and not message[:2].isupper():
        message = message[0].lower() + message[1:]
    return f"{message} (see '{where} --help')"


@click.group(cls=ChitGroup, invoke_without_command=True)
@click.version_option(__version__, prog_name="chit")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="CHIT_HOME",
    help="chit's home directory (default: $CHIT_HOME, else the user data dir).",
)
@click.option(
    "--readonly",
    is_flag=True,
    envvar="CHIT_READONLY",
    help="With no command: open the TUI to look only (no answer, cancel, accept or call).",
)
@click.option(
    "--no-daemon",
    is_flag=True,
    envvar="CHIT_NO_DAEMON",
    help="Run the engine in this process instead of asking the home's daemon (scripts, tests).",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None, readonly: bool, no_daemon: bool) -> None:
    """chit: durable work receipts for MCP tasks. With no command, opens the TUI."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    ctx.obj["readonly"] = readonly
    ctx.obj["no_daemon"] = no_daemon
    if ctx.invoked_subcommand is None:
        from chit.cli.commands_open import open_default

        open_default(ctx)


def _register() -> None:
    """Add the commands of every ``chit.cli.commands_*`` module (each exports COMMANDS).

    Command modules import heavy dependencies (mcp, textual) inside their functions so
    that ``chit --version`` and ``chit receipts`` stay fast.
    """
    import importlib
    import pkgutil

    import chit.cli as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("commands_"):
            module = importlib.import_module(f"chit.cli.{info.name}")
            for command in getattr(module, "COMMANDS", []):
                cli.add_command(command)


_register()


def main() -> None:
    """Entry point of the ``chit`` console script."""
    cli(prog_name="chit")
