"""One check: ask the server about one receipt and record what it said (or why not).

A mixin of :class:`~chit.reconcile.reconciler.Reconciler` (its state lives there): the
receipt is read (the copy in hand while its version is current), the server asked
through the connection pool's limiter, and the answer — or the failure, as a retrieval
condition, never as a lifecycle state — submitted to the batched writer.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from datetime import datetime

from chit.receipts import (
    Event,
    LifecycleState,
    ObservationSource,
    Receipt,
    RetrievalCondition,
    RetrievalFailed,
    StatusObserved,
    TaskProtocol,
)
from chit.reconcile.connections import ConnectionPool
from chit.reconcile.handles import HandleBook, HandleUnavailable
from chit.reconcile.inbox import LegacyInbox
from chit.reconcile.observe import TaskObserver
from chit.reconcile.outcomes import failure_event
from chit.reconcile.push import PushSubscriptions
from chit.reconcile.writer import ReceiptWriter
from chit.store import Store
from chit.store.db import fetch_one
from chit.tasks.client import TaskError
from chit.tasks.client.inputs import Hint

log = logging.getLogger("chit.reconcile")


class ReceiptCheck:
    """Checks one receipt (mixed into ``Reconciler``, which sets this state)."""

    store: Store
    writer: ReceiptWriter
    handles: HandleBook
    pool: ConnectionPool
    inbox: LegacyInbox
    push: PushSubscriptions
    observer: TaskObserver
    checks: int
    _running: bool
    _known: dict[str, Receipt]
    _in_hand: list[tuple[datetime, str]]
    _queued: dict[str, str]
    _ended: dict[str, Hint]

    async def check(
        self,
        receipt_id: str,
        source: ObservationSource = ObservationSource.POLL,
        *,
        version: int | None = None,
    ) -> Receipt | None:
        """Ask the server about one receipt and record what it said (or why it could not).

        ``version``: the receipt's stored version as the caller read it just now (``kick``
        reads those of many receipts in one query); None: read here.
        """
        receipt = self._read(receipt_id, version)
        if receipt is None or receipt.protocol is TaskProtocol.SYNC:
            return receipt
        if receipt.is_terminal and not needs_result(receipt):
            self._known.pop(receipt_id, None)
            return receipt
        self.checks += 1
        try:
            task_id = self.handles.task_id(receipt)
        except HandleUnavailable as exc:
            event = RetrievalFailed(
                condition=RetrievalCondition.INCOMPATIBLE, message=str(exc), source=source
            )
            return await self.writer.submit(receipt_id, [event], base=receipt)
        hinted = source is ObservationSource.NOTIFICATION
        asked = self.writer.clock.now()
        try:
            events = await self._ask(receipt, task_id, source, urgent=hinted)
            if receipt.protocol is TaskProtocol.LEGACY:
                # Judged when it commits: a prompt received since makes it stale.
                events = [_asked(ev, asked) for ev in events]
        except TaskError as exc:
            if exc.failure_class == "transient":
                self.pool.broken(receipt.server)
            event = failure_event(exc, source)
            if exc.failure_class == "lost":
                # A stdio server's task that died with an earlier process of the server
                # is said so in words (what happened, not just "unknown task").
                ended = self.pool.lost_with_process(
                    receipt.server, receipt.accepted_at, receipt.expires_at
                )
                if ended is not None:  # the server's own words stay beside it
                    event = dataclasses.replace(event, message=f"{ended} ({event.message})")
            return await self.writer.submit(receipt_id, [event], base=receipt)
        except Exception as exc:
            # Anything else (a bug, a resolver surprise) is still recorded, with backoff:
            # a check that writes nothing would leave the receipt due, checked every tick.
            log.warning("check of %s raised", receipt_id, exc_info=True)
            odd = RetrievalFailed(
                condition=RetrievalCondition.UNREACHABLE,
                message=f"unexpected error: {type(exc).__name__}: {exc}"[:300],
                source=source,
            )
            return await self.writer.submit(receipt_id, [odd], base=receipt)
        self.pool.succeeded(receipt.server)
        # A hint that found nothing new writes nothing: the schedule stays as it was. A
        # poll that found nothing new is held in memory while reconciling (behind.py).
        try:
            after = await self.writer.submit(
                receipt_id, events, base=receipt, skip_freshness=hinted, behind=self._running
            )
        except (OverflowError, ValueError) as exc:
            # The reply parsed but cannot be folded (e.g. a TTL past year 9999): a
            # malformed answer, recorded as such instead of failing the check.
            bad = RetrievalFailed(
                condition=RetrievalCondition.UNREACHABLE,
                message=f"protocol_violation: unusable reply ({exc})"[:300],
                source=source,
            )
            return await self.writer.submit(receipt_id, [bad], base=receipt)
        self._remember(after)
        if after.next_check_at is not None and receipt_id in self.writer.behind.pending:
            # The store's next check is older than this one: the loop takes it from here.
            heapq.heappush(self._in_hand, (after.next_check_at, receipt_id))
        self.push.track(after.server, task_id, live=not after.is_terminal)
        if after.state is LifecycleState.INPUT_REQUIRED and after.protocol is TaskProtocol.LEGACY:
            self.inbox.ensure_watch(after, task_id)
        return after

    def _read(self, receipt_id: str, version: int | None = None) -> Receipt | None:
        """The receipt as stored: the copy in hand when its version is still current.

        Saves parsing the JSON document on every check; any other writer (an answer, a
        cancel, another process) bumps the version and the row is read again.
        ``version``, when given, is the stored one as read just before (``kick``).
        """
        known = self._known.get(receipt_id)
        if known is not None:
            if version is None:
                row = fetch_one(
                    self.store.db,
                    "SELECT version FROM receipts WHERE receipt_id = ?",
                    [receipt_id],
                )
                version = int(row[0]) if row is not None else None
            if version == known.version:
                return known
        return self.store.receipts.get(receipt_id)

    def _remember(self, receipt: Receipt) -> None:
        if receipt.is_terminal and not needs_result(receipt):
            self._known.pop(receipt.receipt_id, None)  # never checked again
        else:
            self._known[receipt.receipt_id] = receipt

    async def _ask(
        self, receipt: Receipt, task_id: str, source: ObservationSource, *, urgent: bool
    ) -> list[Event]:
        rid = receipt.receipt_id
        told = self._told(receipt, task_id)
        if told is not None:  # a 2026 end pushed with its result: nothing to ask
            return told
        self._queued[rid] = receipt.server
        try:
            async with self.pool.limit(receipt.server, urgent=urgent, key=rid):
                self._queued.pop(rid, None)
                client = await self.pool.get(receipt.server)
                ended = self._ended.pop(rid, None)
                events = await self.observer.observe(client, receipt, task_id, source, ended)
        finally:
            self._queued.pop(rid, None)
        # A 2026 end pushed while this check was asking: newer than the answer, and one
        # commit instead of this answer's and then a second check's.
        return self._told(receipt, task_id) or events

    def _told(self, receipt: Receipt, task_id: str) -> list[Event] | None:
        """The events of a 2026 end pushed with its result (``TaskObserver.told``), if any."""
        ended = self._ended.get(receipt.receipt_id)
        if ended is None:
            return None
        told = self.observer.told(receipt, task_id, ended)
        if told is not None:
            del self._ended[receipt.receipt_id]
        return told


def _asked(ev: Event, asked: datetime) -> Event:
    if isinstance(ev, StatusObserved):
        return dataclasses.replace(ev, asked_at=asked)
    return ev


def needs_result(receipt: Receipt) -> bool:
    return (
        receipt.outcome is None
        and receipt.state in (LifecycleState.COMPLETED, LifecycleState.FAILED)
        and receipt.next_check_at is not None
    )
