"""The read-only banner and the status line under the table."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from chit.receipts import LifecycleState
from chit.tui.backend import Mode
from chit.tui.safe import one_line
from chit.tui.view import Snapshot


class Banner(Static):
    """A full-width warning (key store unavailable, read-only, demo); hidden when empty."""

    DEFAULT_CSS = """
    Banner { background: $warning-muted; color: $text; padding: 0 1; text-style: bold; }
    Banner.-empty { display: none; }
    """

    def __init__(self, mode: Mode) -> None:
        super().__init__(Text(mode.banner or ""), classes="" if mode.banner else "-empty")


class StatusLine(Static):
    """Counts by state, the inbox, server health, the filter, pause and the mode note."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $panel; color: $foreground; }
    """

    def show(
        self, snapshot: Snapshot, mode: Mode, filter_text: str, *, paused: bool = False
    ) -> None:
        """Render the line for ``snapshot``."""
        parts: list[Text] = [Text(f"{snapshot.total} receipts", style="bold")]
        counts = snapshot.counts
        for state, label in (
            (LifecycleState.WORKING, "working"),
            (LifecycleState.INPUT_REQUIRED, "input"),
            (LifecycleState.FAILED, "failed"),
        ):
            if counts.get(state):
                parts.append(Text(f"{counts[state]} {label}"))
        if snapshot.waiting:
            parts.append(Text(f"inbox {snapshot.waiting} (i)", style="bold"))
        for health in snapshot.health:
            parts.append(Text(f"{one_line(health.server)} unreachable", style="bold reverse"))
        if snapshot.more:
            parts.append(Text(f"first {snapshot.loaded} shown"))
        if snapshot.indexing:
            parts.append(Text(f"indexing {snapshot.total} receipts…", style="italic"))
        if filter_text:
            parts.append(Text(f"filter: {one_line(filter_text)}"))
        if paused:
            parts.append(Text("PAUSED (z resumes)", style="bold reverse"))
        if mode.readonly:
            parts.append(Text("READ-ONLY", style="bold"))
        if mode.note:
            parts.append(Text(mode.note, style="italic"))
        line = Text(" · ").join(parts)
        # Static.update lays the screen out again: skip it when nothing changed (most
        # clock ticks).
        if line != getattr(self, "_line", None):
            self._line = line
            self.update(line)
