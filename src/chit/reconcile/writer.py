"""Applying events to stored receipts: optimistic concurrency, batching, change callbacks.

Every write reads the receipt, folds the events through ``transitions.apply`` and writes
the result with ``expected_version``; a concurrent writer (the CLI answering while the
daemon polls) makes it re-read and re-apply instead of overwriting.

Checks write through :meth:`ReceiptWriter.submit`: writes submitted within
``batch_window_s`` of each other commit in **one** ``BEGIN IMMEDIATE`` transaction, so a
burst of checks costs one fsync (``synchronous=FULL`` stays) instead of one each. Each
receipt's write is a savepoint inside the batch — all or nothing per receipt — and a
receipt that fails (a ``StaleWrite``, a ``Conflict``) is rolled back alone; the others
commit.

With a ``batch_store`` (a second connection to the same file; the Supervisor's) a batch
is folded and committed in a worker thread, so the event loop keeps reading replies and
notifications while the disk syncs (``synchronous=FULL``: an fsync per commit held the
loop for 0.65-0.76 s of every 5 s at 200 live tasks). ``submit`` still returns only after
COMMIT; the change callbacks run back on the loop, in commit order. A change feed that
reads the store on its own asks :meth:`ReceiptWriter.announced_through` how far it may
read: a batch between its COMMIT and its callbacks must not be seen before its callbacks
(they carry the state before each change).

Server text is redacted here, before it is folded (``chit.reconcile.boundary``): every
write goes through this class, so no path can store a task handle or a sealed secret a
server echoed.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

import anyio

from chit.clock import Clock, current_clock, in_thread
from chit.receipts import Event, Observation, Receipt, apply
from chit.reconcile.boundary import carries_text, redact_events
from chit.redaction import Redactor
from chit.store import StaleWrite, Store, StoreError, immediate
from chit.store.db import translated

log = logging.getLogger("chit.reconcile")

ChangeCallback = Callable[[Receipt | None, Receipt, tuple[str, ...]], None]
"""Called after every committed change: (before, after, changed fields)."""

RedactorFor = Callable[[Receipt], Redactor]
"""The redactor for a receipt's server text (``HandleBook.redactor``)."""

JITTER = 0.1
"""Each scheduled check moves later by up to 10 % of its interval, so tasks created together
do not all poll in the same instant."""

FRESHNESS = frozenset({"status_at", "next_check_at", "stale_after"})
"""Fields a check that saw nothing new still moves: bookkeeping, not news."""

BATCH_WINDOW_S = 0.01
"""How long the first write of a batch waits for others to join it. Checks finish in
bursts (16 in flight per server); 10 ms gathers ~5 checks per fsync under load (3 ms
gathered 2.5) and stays far below the 100 ms notification → store budget."""

MAX_BATCH = 256
"""Most receipts per transaction: bounds how long the write lock is held."""

_MAX_ATTEMPTS = 8


@dataclass(eq=False)
class _Write:
    receipt_id: str
    events: tuple[Event, ...]
    base: Receipt | None
    skip_freshness: bool
    wipe_handle: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Receipt | None = None
    error: BaseException | None = None
    notice: tuple[Receipt, Receipt, tuple[str, ...]] | None = None
    redactor: Redactor | None = None  # found on the loop (it may read the loop's store)
    skipped: bool = False
    on_loop: bool = False  # must be written on the loop (no redactor could be found)


class _NeedsLoop(Exception):
    """A write in the worker thread needs what only the loop can do (find its redactor)."""


class ReceiptWriter:
    """Writes events to receipts and tells subscribers what changed."""

    def __init__(
        self,
        store: Store,
        on_change: ChangeCallback | None = None,
        *,
        batch_window_s: float = BATCH_WINDOW_S,
        max_batch: int = MAX_BATCH,
        redactor: RedactorFor | None = None,
        digest_key: bytes | None = None,
        clock: Clock | None = None,
        batch_store: Store | None = None,
    ) -> None:
        """Write through ``store``; ``on_change`` hears every committed change.

        ``batch_window_s=0`` turns batching off: every submitted write is its own
        transaction (the benchmark's "before" figures). ``redactor`` gives each receipt's
        redactor (its handle, its server's secrets); ``digest_key`` derives the keys of
        input requests whose server key holds a secret (``boundary.derived_key``).
        ``clock`` dates the folds and the schedule, and times the batch window (so a test
        on a manual clock steps through it like any other wait). ``batch_store``, a
        second connection to the same file opened with ``check_same_thread=False``,
        commits the batches in a worker thread (see the module docstring); the writer
        closes it in :meth:`aclose`.
        """
        self.store = store
        self.batch_store = batch_store
        self.redactor = redactor
        self.digest_key = digest_key
        self.clock = clock or current_clock()
        self._on_change = on_change
        self._watchers: list[Callable[[], None]] = []
        self._changed: dict[str, anyio.Event] = {}
        self._rng = random.Random()
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self._queue: list[_Write] = []
        self._leading = False
        self._drained: anyio.Event | None = None  # set when the leader ends (``aclose``)
        self._floor: int | None = None  # see ``announced_through``
        self._limiter: anyio.CapacityLimiter | None = None
        self.transactions = 0
        self.skipped = 0

    def announced_through(self) -> int | None:
        """How far a reader of the change cursor may go; None: as far as it likes.

        While a batch runs in the worker thread, its changes may be committed before
        their callbacks run: every change numbered above the returned one may be such a
        change. Changes up to it were committed before the batch began (its own take
        higher numbers under the write lock).
        """
        return self._floor

    async def aclose(self) -> None:
        """Wait for the batch in flight, then close ``batch_store`` (later batches commit
        on the loop, through ``store``)."""
        while self._leading:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()
        batch_store, self.batch_store = self.batch_store, None
        if batch_store is not None:
            batch_store.close()

    async def wait_change(self, receipt_id: str) -> None:
        """Wait for the next change of ``receipt_id`` committed through this writer."""
        event = self._changed.get(receipt_id)
        if event is None:
            event = self._changed[receipt_id] = anyio.Event()
        await event.wait()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (cheap, never raising) after every committed change."""
        self._watchers.append(callback)

    def notify(self, before: Receipt | None, after: Receipt, changes: tuple[str, ...]) -> None:
        """Tell the subscriber about a change (its exceptions never reach the engine)."""
        waiting = self._changed.pop(after.receipt_id, None)
        if waiting is not None:
            waiting.set()
        for watcher in self._watchers:
            watcher()
        if self._on_change is None:
            return
        try:
            self._on_change(before, after, changes)
        except Exception:  # a broken subscriber must not kill the reconciler
            log.exception("receipt change callback raised")

    # --- one write, now ----------------------------------------------------------------

    def apply(
        self, receipt_id: str, events: Sequence[Event], *, wipe_handle: bool = False
    ) -> Receipt:
        """Apply ``events`` in order and commit them with their timeline rows, now.

        Returns:
            The receipt as stored afterwards (unchanged when no event applied).

        Raises:
            RecordNotFound: no such receipt.
            StaleWrite: the receipt kept changing under us.
        """
        item = _Write(receipt_id, tuple(events), None, False, wipe_handle)
        result = self._write_alone(item, self.store)
        self.transactions += 1
        self._announce(item)
        return result

    def _write_alone(self, item: _Write, store: Store) -> Receipt:
        """``item`` in a transaction of its own through ``store``, re-read while stale."""
        item.base = None
        for _attempt in range(_MAX_ATTEMPTS):
            try:
                with immediate(store.db):
                    result = self._write(item, store)
            except StaleWrite:
                item.base = None
                continue  # someone else wrote in between: re-read and re-apply
            return result
        raise StaleWrite(
            f"receipt {item.receipt_id} kept changing; gave up after {_MAX_ATTEMPTS} tries"
        )

    # --- batched writes ----------------------------------------------------------------

    async def submit(
        self,
        receipt_id: str,
        events: Sequence[Event],
        *,
        base: Receipt | None = None,
        skip_freshness: bool = False,
    ) -> Receipt:
        """Apply ``events`` in the next batch and wait until it committed.

        Args:
            receipt_id: the receipt to write.
            events: what was observed, in order.
            base: the receipt as read before the request (saves re-parsing it when
                nobody wrote since; it is still version-checked under the lock).
            skip_freshness: write nothing at all when the events only refresh
                ``FRESHNESS`` fields (a hint that found no change: the schedule is
                untouched and the next poll refreshes them).

        Returns:
            The receipt as stored afterwards.

        Raises:
            RecordNotFound, StaleWrite, StoreError: this receipt's write failed (the
                others in the batch are not affected).
        """
        item = _Write(receipt_id, tuple(events), base, skip_freshness)
        if self.batch_window_s <= 0:
            return self.apply(receipt_id, events)
        if self.batch_store is not None:
            item.redactor = self._redactor_on_loop(item)
        self._queue.append(item)
        if self._leading:
            await item.done.wait()
        else:
            self._leading = True
            try:
                # Shielded: once a write is queued it is written, even if its check is
                # cancelled (the others in the batch must not be orphaned).
                with anyio.CancelScope(shield=True):
                    await self.clock.sleep(self.batch_window_s)
                    while self._queue:
                        batch = self._queue[: self.max_batch]
                        del self._queue[: self.max_batch]
                        await self._flush(batch)
            finally:
                self._leading = False
                if self._drained is not None:
                    self._drained.set()
                    self._drained = None
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _redactor_on_loop(self, item: _Write) -> Redactor | None:
        # The redactor may open the receipt's handle, reading the loop's connection: it
        # is found here, before the batch leaves the loop.
        if self.redactor is None or not any(carries_text(e) for e in item.events):
            return None
        receipt = item.base
        if receipt is None:
            try:
                receipt = self.store.receipts.get(item.receipt_id)
            except StoreError:
                receipt = None
        return self.redactor(receipt) if receipt is not None else None

    async def _flush(self, batch: list[_Write]) -> None:
        """Commit ``batch`` (in the worker thread when there is a ``batch_store``), then
        resolve its writes and announce its changes, on the loop, in order."""
        batch_store = self.batch_store
        if batch_store is None:
            self.transactions += self._commit(batch, self.store)
            self._announce_batch(batch)
            return
        try:
            self._floor = self.store.receipts.change_cursor()
        except StoreError:
            self._floor = 0  # a feed then waits for this batch's callbacks
        try:
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(1)
            self.transactions += await in_thread(
                self.clock, self._commit, batch, batch_store, limiter=self._limiter
            )
        except Exception as exc:  # the thread could not run it: nothing is known written
            for item in batch:
                if item.error is None and item.result is None and not item.on_loop:
                    item.error, item.notice = exc, None
        try:
            for item in batch:
                if item.on_loop:  # rare: a receipt that appeared after ``submit`` looked
                    item.error, item.on_loop = None, False
                    try:
                        item.result = self._write_alone(item, self.store)
                        self.transactions += 1
                    except Exception as exc:
                        item.error = exc
        finally:
            self._announce_batch(batch)
            self._floor = None

    def _announce_batch(self, batch: list[_Write]) -> None:
        for item in batch:
            if item.error is None:
                if item.skipped:
                    self.skipped += 1
                self._announce(item)
            item.done.set()

    def _commit(self, batch: list[_Write], store: Store) -> int:
        """Write ``batch`` in one transaction through ``store``; the transactions it took.

        Announces nothing and resolves nothing: it may run in the worker thread.
        """
        transactions = 0
        retry: set[int] = set()
        try:
            with immediate(store.db):
                for item in batch:
                    try:
                        with self._savepoint(store):  # per-receipt atomicity in the batch
                            item.result = self._write(item, store)
                    except StaleWrite:
                        retry.add(id(item))
                    except _NeedsLoop:
                        item.on_loop = True
                    except Exception as exc:
                        item.error = exc
        except Exception as exc:
            # The batch's COMMIT failed (disk full, I/O error): no write of it is known
            # to have landed; every check sees the error and is retried by the schedule.
            for item in batch:
                item.error, item.result, item.notice = exc, None, None
        else:
            transactions += 1
        for item in batch:
            if id(item) in retry:
                # Re-written on its own: its outcome is this write's, not the batch's (a
                # failed batch COMMIT set ``error`` on it too; the retry may well land).
                item.error = None
                try:
                    item.result = self._write_alone(item, store)
                    transactions += 1
                except _NeedsLoop:
                    item.on_loop = True
                except Exception as exc:
                    item.error = exc
        return transactions

    @contextmanager
    def _savepoint(self, store: Store) -> Iterator[None]:
        """One receipt's write inside the batch: undone alone if it fails.

        Plain SQL rather than sqlite-utils' ``atomic()`` (a random name and a generator
        per receipt): this runs once per check.
        """
        conn = store.db.conn
        with translated():
            conn.execute("SAVEPOINT receipt_write")
        try:
            yield
        except BaseException:
            with translated():
                if conn.in_transaction:
                    conn.execute("ROLLBACK TO receipt_write")
                    conn.execute("RELEASE receipt_write")
            raise
        with translated():
            conn.execute("RELEASE receipt_write")

    # --- the fold -------------------------------------------------------------------------

    @staticmethod
    def _current(item: _Write, store: Store) -> Receipt:
        # The base a check read is folded on without reading its version again: the
        # UPDATE is guarded by that version, so a receipt someone changed meanwhile
        # fails it (StaleWrite) and is re-read and re-folded on its own (_commit).
        if item.base is not None:
            return item.base
        return store.receipts.require(item.receipt_id)

    def _write(self, item: _Write, store: Store) -> Receipt:
        """Fold and write one receipt inside the caller's transaction on ``store``.

        Raises:
            _NeedsLoop: in the worker thread, server text to redact and no redactor
                found on the loop (the receipt appeared after ``submit`` looked).
        """
        item.notice = None
        item.skipped = False
        before = self._current(item, store)
        now = self.clock.now()
        current = before
        observations: list[Observation] = []
        changes: list[str] = []
        events: Sequence[Event] = item.events
        if self.redactor is not None and any(carries_text(e) for e in events):
            redactor = item.redactor
            if redactor is None:
                if store is not self.store:
                    raise _NeedsLoop(item.receipt_id)
                redactor = self.redactor(before)
            events = redact_events(events, redactor, self.digest_key)
        for event in events:
            step = apply(current, event, now)
            observations.append(step.observation)
            changes.extend(step.changes)
            current = step.receipt
        if item.skip_freshness and set(changes) <= FRESHNESS:
            item.skipped = True
            return before
        if current is before:
            if observations:
                store.observations.append(*observations)
            return before
        current = self._jitter(before, current)
        stored = store.receipts.update(
            current, observations, expected_version=before.version, wipe_handle=item.wipe_handle
        )
        item.notice = (before, stored, tuple(dict.fromkeys(changes)))
        return stored

    def _announce(self, item: _Write) -> None:
        if item.notice is not None:
            self.notify(*item.notice)
            item.notice = None

    def _jitter(self, before: Receipt, after: Receipt) -> Receipt:
        nxt = after.next_check_at
        if nxt is None or after.is_terminal or nxt == before.next_check_at:
            return after
        span = (nxt - self.clock.now()).total_seconds()
        if span <= 0:
            return after
        # Only later, never sooner: the floor of the poll interval stays a floor.
        shift = self._rng.uniform(0.0, JITTER) * span
        return after.model_copy(update={"next_check_at": nxt + timedelta(seconds=shift)})
