"""The read-only / viewer banner and the status line under the table."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from chit.receipts import LifecycleState
from chit.tui.backend import Mode
from chit.tui.view import Snapshot


class Banner(Static):
    """A full-width warning (key store unavailable, read-only, viewer); hidden when empty."""

    DEFAULT_CSS = """
    Banner { background: $warning 30%; color: $text; padding: 0 1; text-style: bold; }
    Banner.-empty { display: none; }
    """

    def __init__(self, mode: Mode) -> None:
        super().__init__(mode.banner or "", classes="" if mode.banner else "-empty")


class StatusLine(Static):
    """Counts by state, the inbox size, the filter and the mode note."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """

    def show(self, snapshot: Snapshot, mode: Mode, filter_text: str) -> None:
        """Render the line for ``snapshot``."""
        counts = snapshot.counts
        line = Text()
        line.append(f"{snapshot.total} receipts", style="bold")
        for state, label in (
            (LifecycleState.WORKING, "working"),
            (LifecycleState.INPUT_REQUIRED, "input"),
            (LifecycleState.FAILED, "failed"),
        ):
            if counts.get(state):
                line.append(f" · {counts[state]} {label}")
        if snapshot.waiting:
            line.append(f" · inbox {snapshot.waiting} (i)", style="bold")
        if snapshot.more:
            line.append(f" · showing {snapshot.loaded}")
        if filter_text:
            line.append(f" · filter: {filter_text}")
        if mode.readonly:
            line.append(" · READ-ONLY", style="bold")
        if mode.note:
            line.append(f" · {mode.note}", style="italic")
        self.update(line)
