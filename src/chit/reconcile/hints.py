"""Hints: a server said a task changed — check it now, or pull its next check earlier.

A mixin of :class:`~chit.reconcile.reconciler.Reconciler` (its state lives there). A
new status triggers an immediate, coalesced check: ``tasks/get`` (for a 2025 task that
ended: the ``tasks/result`` the end implies; a 2026 end carrying its DetailedTask is
folded as the ``tasks/get`` answer it equals, see ``TaskObserver.told``); a
status-*message* change only brings the next poll within ``HINT_PULL_S``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import anyio

from chit.clock import Clock, parse_iso
from chit.receipts import LifecycleState, Receipt
from chit.reconcile.connections import ConnectionPool
from chit.reconcile.handles import HandleBook
from chit.store import Store
from chit.store.db import fetch_one
from chit.tasks.client.inputs import Hint

_ENDED = frozenset({LifecycleState.COMPLETED.value, LifecycleState.FAILED.value})

HINT_PULL_S = 5.0
"""A message-only hint brings the receipt's next check to within this (never sooner: at
most one extra check per receipt per interval however often its message changes)."""


class HintRouting:
    """Routes hints to checks (mixed into ``Reconciler``, which sets this state)."""

    clock: Clock
    store: Store
    handles: HandleBook
    pool: ConnectionPool
    message_hints: int
    _queued: dict[str, str]
    _hinted: set[str]
    _wake: anyio.Event
    _pulled: dict[str, float]
    _ended: dict[str, Hint]
    _known: dict[str, Receipt]

    async def on_hint(self, task_id: str) -> None:
        """A server said a task changed: check it now, unless only its message moved.

        ``task_id`` may be a :class:`Hint` carrying the notified status. A hint that
        shows the stored non-terminal status again (a status-*message* change) only pulls
        the next check earlier (:meth:`_pull`); a different status - a transition, the
        end, ``input_required`` - or an unknown one triggers an immediate, coalesced
        ``tasks/get``. Nothing the push said is written without that ``tasks/get`` — but
        a 2026 end carrying the DetailedTask that ``tasks/get`` is defined to return.
        """
        receipt_id = self.handles.receipt_for(task_id)
        if receipt_id is None:
            return
        status = task_id.status if isinstance(task_id, Hint) else None
        if status is not None and self._same_status(receipt_id, status):
            return
        if isinstance(task_id, Hint) and status in _ENDED:
            self._ended[receipt_id] = task_id
        server = self._queued.get(receipt_id)
        if server is not None and self.pool.promote(server, receipt_id):
            return  # its check has not asked yet: it will see the change, and go first
        self._hinted.add(receipt_id)
        self._wake.set()

    def _same_status(self, receipt_id: str, status: str) -> bool:
        """True when ``status`` is what the receipt already says (no news but the message).

        Judged against the copy in hand (``_known``: the receipt as this process last
        committed it), with no store round trip: at thousands of live tasks a server
        pushes about one message change per task per second, and a read per hint was
        most of what a hint cost. A copy another process made stale can only make a
        hint look like news (an extra check) or like a message change whose check is
        then pulled within ``HINT_PULL_S`` — never a write. A receipt not in hand yet
        is read once. A matching live status pulls the next check earlier (bounded); a
        matching terminal status needs nothing (a missing result is due by the
        schedule anyway). ``input_required`` is never "the same": its prompts may have
        changed with it.
        """
        if status == LifecycleState.INPUT_REQUIRED.value:
            return False
        known = self._known.get(receipt_id)
        if known is not None:
            state, active, nxt = known.state.value, not known.is_terminal, known.next_check_at
        else:
            row = fetch_one(
                self.store.db,
                "SELECT state, active, next_check_at FROM receipts WHERE receipt_id = ?",
                [receipt_id],
            )
            if row is None:
                return False
            state, active = row["state"], bool(row["active"])
            nxt = parse_iso(row["next_check_at"]) if row["next_check_at"] else None
        if state != status:
            return False
        if active:
            self._pull(receipt_id, nxt)
        self.message_hints += 1
        return True

    def _pull(self, receipt_id: str, next_check_at: datetime | None) -> None:
        """Bring a receipt's next check to within ``HINT_PULL_S`` (in memory, no write)."""
        soon = self.clock.now() + timedelta(seconds=HINT_PULL_S)
        if next_check_at is not None and next_check_at <= soon:
            return  # the schedule already checks it soon enough
        deadline = self.clock.monotonic() + HINT_PULL_S
        if self._pulled.get(receipt_id, deadline + 1) > deadline:
            self._pulled[receipt_id] = deadline

    def _due_pulls(self) -> list[str]:
        if not self._pulled:
            return []
        now = self.clock.monotonic()
        due = [rid for rid, at in self._pulled.items() if at <= now]
        for rid in due:
            del self._pulled[rid]
        return due
