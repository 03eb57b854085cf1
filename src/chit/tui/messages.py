"""Textual messages carrying data from workers and Supervisor events to the screens.

Worker results travel as frozen snapshots (``view.Snapshot``); the refresh request can
replace a queued one, so a storm of "receipt changed" events becomes one reload
(toolong's ``can_replace`` pattern).
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from chit.tui.view import Detail, RecordDetail, Snapshot


class SnapshotLoaded(Message, bubble=False):
    """A fresh view of the store for the main screen."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        super().__init__()


class DetailLoaded(Message, bubble=False):
    """The detail of the highlighted receipt or work record (None: it disappeared)."""

    def __init__(self, key: str, detail: Detail | RecordDetail | None) -> None:
        self.key = key
        self.detail = detail
        super().__init__()


class RefreshRequested(Message, bubble=False):
    """Something changed: reload. Queued duplicates collapse into one."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RefreshRequested)


class SupervisorEvent(Message, bubble=False):
    """One event from the Supervisor's bus (ReceiptChanged, InputRequired, …)."""

    def __init__(self, event: Any) -> None:
        self.event = event
        super().__init__()
