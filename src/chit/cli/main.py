"""The ``chit`` command: a click group whose commands live in sibling modules.

stdout carries data only; errors are one line on stderr with a stable exit code
(``chit.errors.ExitCode``). Tracebacks are shown only with ``CHIT_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from chit import __version__
from chit.cli import terminal_log
from chit.cli.params import GLOBAL, click_params
from chit.cli.terminal import exit_for, fail, one_line
from chit.errors import ExitCode
from chit.inputs import first_surrogate

__all__ = ["COMMAND_MODULES", "ChitGroup", "cli", "fail", "load_command", "main", "one_line"]

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
        terminal_log.install()
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
        except (KeyboardInterrupt, Exception) as exc:
            # ChitError, Ctrl-C, a closed pipe, a bug: as the click-free entry ends them.
            exit_for(exc)


def usage_line(exc: click.UsageError) -> str:
    """click's usage error as one line, pointing at the command's ``--help``."""
    where = exc.ctx.command_path if exc.ctx is not None else "chit"
    message = exc.format_message().rstrip(".")
    if message and message[0].isupper() and not message[:2].isupper():
        message = message[0].lower() + message[1:]
    return f"{message} (see '{where} --help')"


@click.group(cls=ChitGroup, invoke_without_command=True)
@click.version_option(__version__, prog_name="chit")
@click_params(GLOBAL)
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
    from chit import stackdump

    stackdump.install()  # kill -USR1: where a command that does not end is waiting
    cli(prog_name="chit")
