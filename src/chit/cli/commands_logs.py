"""``chit logs NAME [-f]``: what a stdio server wrote to its stderr.

A stdio server's stderr goes to ``logs/servers/NAME.log`` in the home (never to anyone's
terminal); this prints it, and with ``-f`` keeps printing what the server writes until
Ctrl-C. Lines are printed as written, minus terminal control characters: a server's
output is hostile text like anything else it sends.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import click

from chit.cli.context import home_of
from chit.errors import ExitCode, NotFound, UsageError

FOLLOW_POLL_S = 0.25
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def _clean(text: str) -> str:
    return _CONTROL.sub("", text)


def _tail(path: Path, lines: int) -> tuple[str, int]:
    """The last ``lines`` lines of ``path`` and the size read up to."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        chunk = 64 * 1024
        data = b""
        while size > len(data) and data.count(b"\n") <= lines:
            start = max(0, size - len(data) - chunk)
            handle.seek(start)
            data = handle.read(size - len(data) - start) + data
        text = data.decode("utf-8", "replace")
    kept = text.splitlines(keepends=True)[-lines:] if lines else []
    return "".join(kept), size


@click.command("logs")
@click.argument("name")
@click.option("-f", "--follow", is_flag=True, help="Keep printing what the server writes.")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=200, show_default=True)
@click.pass_context
def logs(ctx: click.Context, name: str, follow: bool, lines: int) -> None:
    """Show what stdio server NAME wrote to its stderr (``logs/servers/NAME.log``)."""
    from chit.runtime.server_logs import server_log_path
    from chit.servers import Registry
    from chit.servers.spec import valid_name

    home = home_of(ctx)
    if not valid_name(name):
        raise NotFound(f"no server named {name!r}")
    path = server_log_path(home, name)
    if not path.exists():
        known = name in Registry.for_home(home).servers()
        if not known:
            raise NotFound(f"no server named {name!r} (and no log of one)")
        if not follow:
            click.echo(f"chit: {name} has written nothing to stderr yet ({path})", err=True)
            return
    if path.exists():
        from chit.files import NotRegularFile, check_regular

        try:
            check_regular(path)
        except NotRegularFile as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    text, offset = _tail(path, lines) if path.exists() else ("", 0)
    click.echo(_clean(text), nl=False)
    if not follow:
        return
    try:
        _follow(path, offset)
    except KeyboardInterrupt:
        sys.exit(int(ExitCode.OK))


def _follow(path: Path, offset: int) -> None:
    while True:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:  # rotated (copy-and-truncate): start again from the top
            offset = 0
        if size > offset:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size - offset)
            offset += len(data)
            click.echo(_clean(data.decode("utf-8", "replace")), nl=False)
        time.sleep(FOLLOW_POLL_S)


COMMANDS = [logs]
