"""``chit`` with no command, and ``chit open``: the supervisor TUI on CHIT_HOME."""

from __future__ import annotations

import os
import sys

import click

from chit.cli.context import home_of


def _run(ctx: click.Context, readonly: bool) -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # No terminal to draw on (a pipe, CI): the TUI cannot run; be useful instead.
        click.echo(ctx.get_help())
        return
    from chit.cli.engine import options_from_env, use_daemon
    from chit.tui.launch import build_app, run

    home = home_of(ctx)
    daemon = use_daemon(ctx)
    # Checked before Textual starts: bad settings are one line and exit 2.
    options = None if daemon else options_from_env()
    app = build_app(home, readonly=readonly, use_daemon=daemon, options=options)
    code = run(app, home)
    if code:
        ctx.exit(code)


def open_default(ctx: click.Context) -> None:
    """Open the TUI on the configured home (``chit --readonly`` / ``CHIT_READONLY=1``)."""
    obj = ctx.find_root().obj or {}
    readonly = bool(obj.get("readonly")) or os.environ.get("CHIT_READONLY", "") not in ("", "0")
    _run(ctx, readonly=readonly)


@click.command("open")
@click.option("--readonly", is_flag=True, help="Look only: no answer, cancel, accept or call.")
@click.pass_context
def open_tui(ctx: click.Context, readonly: bool) -> None:
    """Open the supervisor TUI on CHIT_HOME (same as plain `chit`).

    The TUI is a client of chit's daemon (started on demand), which owns every server
    session: quitting the TUI stops no task. `--no-daemon` runs the engine in this process.
    """
    _run(ctx, readonly or os.environ.get("CHIT_READONLY", "") not in ("", "0"))


COMMANDS = [open_tui]
