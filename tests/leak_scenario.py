"""Collecting every artifact chit keeps or shows about a home, to search them for secrets.

The database file and its ``-wal``, ``chit export``, ``chit show --json`` and ``chit
show`` for each receipt, the TUI's detail pane rendered to text, and whatever was logged.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from chit import clock
from chit.cli.main import cli
from chit.home import Home
from chit.store import Store

SIDE_FILES = ("chit.db", "chit.db-wal", "chit.db-shm", "chit.db-journal")


def files(home: Path) -> dict[str, bytes]:
    """The bytes of the database and its side files (those that exist)."""
    return {name: (home / name).read_bytes() for name in SIDE_FILES if (home / name).exists()}


def cli_outputs(home: Path, receipt_ids: list[str]) -> dict[str, bytes]:
    """``export``, ``show --json`` and ``show`` of each receipt, as bytes (stdout+stderr)."""
    runner = CliRunner()
    out: dict[str, bytes] = {}
    runs = {"export": ["export"], "receipts": ["receipts", "--json"]}
    for rid in receipt_ids:
        runs[f"show {rid}"] = ["show", rid]
        runs[f"show --json {rid}"] = ["show", "--json", rid]
    for name, args in runs.items():
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, (name, result.output)
        out[name] = result.output.encode("utf-8")
    return out


def tui_text(home: Path, receipt_ids: list[str]) -> dict[str, bytes]:
    """The TUI's detail pane of each receipt, rendered by Rich to plain text."""
    from rich.console import Console
    from textual.app import App

    from chit.tui.view import load_detail
    from chit.tui.widgets.detail import render_receipt

    variables = App().theme_variables
    out: dict[str, bytes] = {}
    with Store.open(Home(home)) as store:
        for rid in receipt_ids:
            detail = load_detail(store, rid, clock.now())
            assert detail is not None
            # Wide enough that nothing is folded: a handle split over two lines would
            # hide from a byte search.
            console = Console(file=io.StringIO(), width=2000, record=True, color_system=None)
            console.print(render_receipt(detail, variables))
            out[f"tui {rid}"] = console.export_text().encode("utf-8")
    return out


@contextmanager
def captured_logs(level: int = logging.DEBUG) -> Iterator[io.StringIO]:
    """Every record of every logger at ``level`` and above, formatted with tracebacks.

    chit's own loggers are opened up to ``level``; third-party ones stay at WARNING (the
    MCP SDK logs raw wire messages at DEBUG, before any client could know a handle).
    """
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.setLevel(level)
    root = logging.getLogger()
    chit_log = logging.getLogger("chit")
    old_root, old_chit = root.level, chit_log.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    chit_log.setLevel(level)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(old_root)
        chit_log.setLevel(old_chit)
