"""The ``chit`` command: a click group whose commands live in sibling modules.

stdout carries data only; errors are one line on stderr with a stable exit code
(``chit.errors.ExitCode``). Tracebacks are shown only with ``CHIT_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from chit import __version__
from chit.errors import ChitError, ExitCode
from chit.inputs import first_surrogate

#: Each top-level command and the ``chit.cli`` modules that define it. A command's
#: modules are imported when the command is run (or help lists it): ``chit receipts``
#: loads one module, not fourteen (issue 9: a cold read ≤ 0.1 s). ``servers`` has
#: subcommands in a second module. tests/test_cli_lazy.py checks this table against
#: every ``commands_*`` module's ``COMMANDS``.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "accept": ("commands_calls",),
    "answer": ("commands_calls",),
    "call": ("commands_calls",),
    "cancel": ("commands_calls",),
    "reject": ("commands_calls",),
    "daemon": ("commands_daemon",),
    "follow": ("commands_daemon",),
    "demo": ("commands_demo",),
    "demo-server": ("commands_demo_server",),
    "doctor": ("commands_doctor",),
    "logs": ("commands_logs",),
    "open": ("commands_open",),
    "proxy": ("commands_proxy",),
    "export": ("commands_receipts",),
    "receipts": ("commands_receipts",),
    "show": ("commands_receipts",),
    "intents": ("commands_reconcile",),
    "reconcile": ("commands_reconcile",),
    "prune": ("commands_retention",),
    "servers": ("commands_servers", "commands_wrap"),
    "tools": ("commands_servers",),
    "sidecar": ("commands_sidecar",),
}


class ChitGroup(click.Group):
    """A click group that maps chit errors to one stderr line and an exit code.

    click's own errors are reported the same way: a usage error is one line and exit 2
    (click prints three: usage, a hint and the error), and an argument that is not valid
    UTF-8 is refused before any command sees it. Commands are loaded on demand
    (``COMMAND_MODULES``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, loaded or not (help, completion)."""
        return sorted({*self.commands, *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command named ``cmd_name``, importing its modules the first time.

        An unknown name loads them all first, so click's "did you mean" suggestions
        see every command, as they did when all were imported up front.
        """
        if cmd_name not in self.commands:
            for name in (cmd_name,) if cmd_name in COMMAND_MODULES else COMMAND_MODULES:
                load_command(name)
        return self.commands.get(cmd_name)

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
                import traceback

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


def load_command(name: str) -> None:
    """Import the modules of command ``name`` and add the commands they export.

    Command modules import heavy dependencies (mcp, textual) inside their functions, so
    loading one costs little; loading only the one asked for keeps ``chit --version``
    and ``chit receipts`` fast.
    """
    for module_name in COMMAND_MODULES[name]:
        module = importlib.import_module(f"chit.cli.{module_name}")
        for command in getattr(module, "COMMANDS", []):
            if command.name not in cli.commands:
                cli.add_command(command)


def main() -> None:
    """Entry point of the ``chit`` console script."""
    cli(prog_name="chit")
