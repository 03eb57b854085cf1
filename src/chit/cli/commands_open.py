"""``chit`` with no command: open the supervisor on CHIT_HOME."""

from __future__ import annotations

import click


def open_default(ctx: click.Context) -> None:
    """Open chit on the configured home (a plain listing until the TUI lands)."""
    click.echo(ctx.get_help())


COMMANDS: list[click.Command] = []
