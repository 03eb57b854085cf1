"""The ``chit`` command: a click group whose commands live in sibling modules.

stdout carries data only; errors are one line on stderr with a stable exit code
(``chit.errors.ExitCode``). Tracebacks are shown only with ``CHIT_DEBUG=1``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

import click

from chit import __version__
from chit.errors import ChitError, ExitCode


class ChitGroup(click.Group):
    """A click group that maps chit errors to one stderr line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except ChitError as exc:
            fail(exc.message, exc.exit_code)
        except sqlite3.OperationalError as exc:
            fail(f"store error: {exc}", ExitCode.STORE)
        except KeyboardInterrupt:
            fail("interrupted", ExitCode.INTERNAL)
        except BrokenPipeError:
            # The reader went away (``chit receipts | head``): not an error. Point stdout
            # at /dev/null so the interpreter's final flush does not fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(int(ExitCode.OK))
        except Exception as exc:  # a bug: keep the terminal clean, offer the details
            if os.environ.get("CHIT_DEBUG"):
                raise
            fail(
                f"internal error: {type(exc).__name__}: {exc} (run with CHIT_DEBUG=1 for details)",
                ExitCode.INTERNAL,
            )


def fail(message: str, code: ExitCode) -> None:
    """Print ``chit: message`` on stderr and exit with ``code``.

    The message is redacted (``chit.redaction``): an unexpected error can quote what a
    server sent, task handle included.
    """
    from chit.redaction import redact

    click.echo(f"chit: {redact(message)}", err=True)
    sys.exit(int(code))


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
