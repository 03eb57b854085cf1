"""Reading the schedule: which receipts are due, tick after tick, without re-reading the
backlog.

Checks wait for one of a server's connection slots; when a server is slow, hundreds of
due receipts wait, and a scan that read every due receipt again (on every hint and
every commit that wakes the loop) spent its CPU on a backlog already kicked. A scan
reads only what became due since the newest ``next_check_at`` it handed out; every
``FULL_SCAN_S`` it reads everything due.
"""

from __future__ import annotations

from chit.clock import Clock
from chit.store import Store

FULL_SCAN_S = 1.0
"""How often everything due is read again: receipts another process scheduled in the
past, checks held after a failure, a due receipt whose hinted check wrote nothing."""


class DueScan:
    """The store's schedule read incrementally (a cursor on ``next_check_at``)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        """Read ``store``'s schedule by ``clock``'s time."""
        self.store = store
        self.clock = clock
        self.cursor: str | None = None  # the newest next_check_at handed out
        self.full_scan_at = 0.0

    def due(self, limit: int = 1000) -> list[str]:
        """Receipts due since the last call (every due receipt, every ``FULL_SCAN_S``)."""
        now = self.clock.monotonic()
        after = self.cursor
        if now >= self.full_scan_at:
            after, self.full_scan_at = None, now + FULL_SCAN_S
        rows = self.store.receipts.due_checks(self.clock.now(), limit, after=after)
        stamps = [at for _, at in rows if at is not None]
        if stamps:
            self.cursor = max(stamps)
        return [rid for rid, _ in rows]
