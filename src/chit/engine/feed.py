"""The change feed: every committed receipt change, in commit order, with a cursor.

The cursor is the receipts' change number (``change_seq``, migration 0007): every
receipt write takes ``max + 1`` under the write lock, so numbers grow in commit order
(a receipt keeps only its latest number: what a returning client needs is each changed
receipt as it is now, once). A subscriber that remembers the cursor of
the last event it saw can come back (after a reconnect, or a daemon restart) with
``since=cursor`` and is sent every receipt changed after it, as it is now.

Two sources feed it. The Supervisor's own writes arrive through its event bus at once
(with the state before the change, so the signals — a new prompt, the end — are exact).
Writes of other processes (a ``--no-daemon`` command, the sidecar) are found by watching
``PRAGMA data_version`` (which moves only when *another* connection commits) while
anybody is subscribed; nobody subscribed, nothing is polled.

The Supervisor's own batches commit on a second connection, in a worker thread
(``ReceiptWriter.batch_store``), so ``data_version`` moves for them too, and a batch is
in the store a moment before its bus events arrive. The feed therefore reads changes
only up to what the writer has announced (``ReceiptWriter.announced_through``): a change
of a batch still in flight is delivered when its bus event comes, with the state before
it, never earlier as a change of unknown origin. A ``data_version`` tick meanwhile just
finds nothing new.

A read held back that way is read again on the watcher's next tick (``poll_s``), not only
at the next announcement: a change committed on the loop while a batch is in the thread
(``ReceiptWriter.apply``: a task's result from ``tasks/result``) is announced while the
batch holds the cursor back, and a batch, a write-behind flush or an intent's group may
end announcing nothing — the change then waited for some unrelated write, and a
subscriber following one receipt (``chit proxy``'s task, ``chit follow``) never saw it end.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

from chit.engine.models import (
    EngineEvent,
    IntentUpdate,
    ReceiptUpdate,
    Resync,
    ServerStatus,
    ServerUpdate,
)
from chit.receipts import Receipt
from chit.runtime.events import (
    Cancelled,
    Completed,
    Failed,
    InputRequired,
    IntentUnknown,
    NearExpiry,
    ReceiptChanged,
    RetrievalProblem,
)
from chit.runtime.events import (
    EngineEvent as BusEvent,
)
from chit.store import Store
from chit.store.db import fetch_one

log = logging.getLogger("chit.engine")

BUFFER = 1024
"""Events queued per subscriber; a subscriber that falls further behind gets a Resync."""

REPLAY_MAX = 2000
"""Most receipts replayed to a returning subscriber; beyond that it is told to re-read."""

EXTERNAL_POLL_S = 0.5
"""How often other processes' commits are looked for while anybody is subscribed."""

SEEN_MAX = 5000
"""Receipts whose last state is remembered (to tell what a change means)."""


@dataclass(eq=False)
class _Subscriber:
    send: MemoryObjectSendStream[EngineEvent]
    receipt_id: str | None
    lagged: bool = False


@dataclass
class _Pending:
    before: Receipt | None
    changes: list[str] = field(default_factory=list)


class ChangeFeed:
    """Turns committed changes into :mod:`chit.engine.models` events for subscribers.

    Runs on the Supervisor's event loop thread (the store connection is bound to it).
    """

    def __init__(
        self,
        store: Store,
        *,
        poll_s: float = EXTERNAL_POLL_S,
        announced: Callable[[], int | None] | None = None,
    ) -> None:
        """Read the store's current cursor; nothing is delivered before ``subscribe``.

        ``announced`` (``ReceiptWriter.announced_through``) bounds how far the feed
        reads while a batch of this process's writer is between COMMIT and its events.
        """
        self.store = store
        self.poll_s = poll_s
        self._announced = announced
        self._subscribers: list[_Subscriber] = []
        self._pending: dict[str, _Pending] = {}
        self._seen: OrderedDict[str, Receipt] = OrderedDict()
        self._cursor = self.current_cursor()
        self._data_version = self._read_data_version()
        self._held_back = False  # a read stopped at the writer's floor: read again
        self._wake = anyio.Event()

    # --- reading the store ----------------------------------------------------------

    def current_cursor(self) -> int:
        """The newest change cursor in the store (0 for an empty store)."""
        return self._bounded(self.store.receipts.change_cursor())

    def _bounded(self, cursor: int) -> int:
        bound = self._announced() if self._announced is not None else None
        return cursor if bound is None else min(cursor, bound)

    def _read_data_version(self) -> int:
        row = fetch_one(self.store.db, "PRAGMA data_version")
        return int(row[0]) if row is not None else 0

    def _changed_since(self, cursor: int, limit: int) -> tuple[list[tuple[str, int]], int]:
        """Receipts changed after ``cursor`` (id, change number), and the new cursor."""
        bound = self._announced() if self._announced is not None else None
        if bound is not None:
            # Changes above ``bound`` may be committed already; if no announcement follows
            # the floor's release, the watcher's next tick reads them (``watch_external``).
            self._held_back = True
        rows = self.store.receipts.changed_since(cursor, limit + 1, upto=bound)
        return rows, max((n for _rid, n in rows), default=cursor)

    # --- sources ----------------------------------------------------------------------

    def on_bus_event(self, event: BusEvent) -> None:
        """The Supervisor's bus: remember what a change was, then deliver it."""
        if isinstance(event, ReceiptChanged):
            rid = event.receipt.receipt_id
            pending = self._pending.get(rid)
            if pending is None:
                pending = self._pending[rid] = _Pending(event.before)
            pending.changes.extend(c for c in event.changes if c not in pending.changes)
            self.pump()
        elif isinstance(event, IntentUnknown):
            self._broadcast(IntentUpdate(intent=event.intent), None)

    def server_changed(self, status: ServerStatus, why: str) -> None:
        """A session opened, closed, failed or was stopped (from the session owner)."""
        self._broadcast(ServerUpdate(status=status, why=why), None)

    def pump(self) -> None:
        """Deliver every change committed since the last one delivered."""
        if not self._subscribers:
            # Nobody listens: move the cursor on and forget; a returning client asks
            # with ``since`` and is served from the store.
            self._pending.clear()
            self._cursor = max(self._cursor, self.current_cursor())
            return
        while True:
            changed, newest = self._changed_since(self._cursor, REPLAY_MAX)
            if not changed:
                self._cursor = max(self._cursor, newest)
                return
            for rid, last in changed[:REPLAY_MAX]:
                self._deliver(rid, last)
            self._cursor = max(self._cursor, changed[:REPLAY_MAX][-1][1])
            if len(changed) <= REPLAY_MAX:
                return

    def _deliver(self, rid: str, cursor: int) -> None:
        receipt = self.store.receipts.get(rid)
        pending = self._pending.pop(rid, None)
        if receipt is None:  # pruned meanwhile
            self._seen.pop(rid, None)
            return
        before = pending.before if pending is not None else self._seen.get(rid)
        changes = tuple(pending.changes) if pending is not None else ()
        self._remember(receipt)
        self._broadcast(update_for(receipt, before, changes, cursor), rid)

    def _remember(self, receipt: Receipt) -> None:
        self._seen[receipt.receipt_id] = receipt
        self._seen.move_to_end(receipt.receipt_id)
        while len(self._seen) > SEEN_MAX:
            self._seen.popitem(last=False)

    # --- delivering -------------------------------------------------------------------

    def _broadcast(self, event: EngineEvent, rid: str | None) -> None:
        for sub in list(self._subscribers):
            if sub.receipt_id is not None and sub.receipt_id != rid:
                continue
            self._offer(sub, event)

    def _offer(self, sub: _Subscriber, event: EngineEvent) -> None:
        try:
            if sub.lagged:
                sub.send.send_nowait(
                    Resync(cursor=self._cursor, reason="events were dropped: re-read")
                )
                sub.lagged = False
            sub.send.send_nowait(event)
        except anyio.WouldBlock:
            sub.lagged = True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._drop(sub)

    def _drop(self, sub: _Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        sub.send.close()

    @asynccontextmanager
    async def subscribe(
        self, receipt_id: str | None = None, since: int | None = None
    ) -> AsyncIterator[ObjectReceiveStream[EngineEvent]]:
        """Receive events until the block ends (see ``Engine.events``)."""
        send, receive = anyio.create_memory_object_stream[EngineEvent](BUFFER)
        self.pump()  # what happened before this subscriber must not reach it as new
        sub = _Subscriber(send, receipt_id)
        if since is not None:
            self._replay(sub, since)
        self._subscribers.append(sub)
        self._wake.set()
        try:
            async with receive:
                yield receive
        finally:
            self._drop(sub)

    def _replay(self, sub: _Subscriber, since: int) -> None:
        changed, _newest = self._changed_since(since, REPLAY_MAX)
        if len(changed) > REPLAY_MAX:
            self._offer(sub, Resync(cursor=self._cursor, reason="too many changes to replay"))
            return
        for rid, last in changed:
            if last > self._cursor or (sub.receipt_id is not None and rid != sub.receipt_id):
                continue
            receipt = self.store.receipts.get(rid)
            if receipt is not None:
                self._offer(sub, update_for(receipt, None, (), last))

    # --- other processes' writes ------------------------------------------------------

    def wake(self) -> None:
        """Wake the watcher (to see a new subscriber, or the stop event)."""
        self._wake.set()

    async def watch_external(self, stop: anyio.Event) -> None:
        """Pump other processes' commits while anybody is subscribed, until ``stop``;
        and what a pump left behind the writer's floor (see the module docstring)."""
        while not stop.is_set():
            if not self._subscribers:
                self._wake = anyio.Event()
                await self._wake.wait()  # a subscriber came, or ``wake`` at shutdown
                continue
            with anyio.move_on_after(self.poll_s):
                await stop.wait()
            try:
                version = self._read_data_version()
                if version != self._data_version or self._held_back:
                    self._data_version = version
                    self._held_back = False
                    self.pump()
            except Exception:  # a busy or failing store: try again on the next tick
                log.warning("change feed could not read the store", exc_info=True)


def update_for(
    receipt: Receipt, before: Receipt | None, changes: tuple[str, ...], cursor: int
) -> ReceiptUpdate:
    """The event for one change of ``receipt`` (``before`` None: not known before)."""
    from chit.runtime.events import derive

    signals = derive(before, receipt)
    ended = next(
        (e.receipt.state for e in signals if isinstance(e, Completed | Failed | Cancelled)),
        None,
    )
    problem = next((e.condition for e in signals if isinstance(e, RetrievalProblem)), None)
    return ReceiptUpdate(
        cursor=cursor,
        receipt=receipt,
        changes=changes,
        new=before is None and "receipt" in changes,
        input_required=tuple(e.request.key for e in signals if isinstance(e, InputRequired)),
        ended=ended,
        problem=problem,
        near_expiry=any(isinstance(e, NearExpiry) for e in signals),
    )
