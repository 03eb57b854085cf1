"""Applying events to stored receipts: optimistic concurrency, batching, change callbacks.

Every write reads the receipt, folds the events through ``transitions.apply`` and writes
the result with ``expected_version``; a concurrent writer (the CLI answering while the
daemon polls) makes it re-read and re-apply instead of overwriting.

Checks write through :meth:`ReceiptWriter.submit`: writes submitted within
``batch_window_s`` of each other commit in **one** transaction, each receipt in a
savepoint of its own (:mod:`chit.reconcile.transactions`); each receipt's events are
folded and written by :class:`chit.reconcile.fold.Folder`.

With a ``batch_store`` (a second connection to the same file; the Supervisor's) a batch
is folded and committed in a worker thread, so the event loop keeps reading replies and
notifications while the disk syncs (``synchronous=FULL``: an fsync per commit held the
loop for 0.65-0.76 s of every 5 s at 200 live tasks). ``submit`` still returns only after
COMMIT; the change callbacks run back on the loop, in commit order. A change feed that
reads the store on its own asks :meth:`ReceiptWriter.announced_through` how far it may
read: a batch between its COMMIT and its callbacks must not be seen before its callbacks
(they carry the state before each change).

Server text is redacted before it is folded (``Folder.write``, with
``chit.reconcile.boundary``): every write goes through this class, so no path can store a
task handle or a sealed secret a server echoed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import anyio

from chit.clock import Clock, current_clock, in_thread
from chit.receipts import Event, Receipt
from chit.reconcile.behind import Behind, WriteBehind, write_chunk
from chit.reconcile.fold import FRESHNESS, JITTER, Folder, PendingWrite, RedactorFor
from chit.reconcile.group import GroupCommit
from chit.reconcile.transactions import commit_batch, write_alone
from chit.store import Store, StoreError

log = logging.getLogger("chit.reconcile")

ChangeCallback = Callable[[Receipt | None, Receipt, tuple[str, ...]], None]
"""Called after every committed change: (before, after, changed fields)."""

BATCH_WINDOW_S = 0.01
"""How long the first write of a batch waits for others to join it. Checks finish in
bursts (16 in flight per server); 10 ms gathers ~5 checks per fsync under load (3 ms
gathered 2.5) and stays far below the 100 ms notification → store budget."""

MAX_BATCH = 256
"""Most receipts per transaction: bounds how long the write lock is held."""


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
        self.clock = clock or current_clock()
        self._folder = Folder(store, redactor, digest_key, self.clock)
        self._on_change = on_change
        self._watchers: list[Callable[[], None]] = []
        self._followers: list[Callable[[Receipt | None, Receipt], None]] = []
        self._changed: dict[str, anyio.Event] = {}
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self._queue: list[PendingWrite] = []
        self._leading = False
        self._drained: anyio.Event | None = None  # set when the leader ends (``aclose``)
        self._flush_ended: anyio.Event | None = None  # set when a flush_behind ends
        self._floors: dict[int, int] = {}  # see ``announced_through`` (one per commit)
        self._floor_ids = 0
        self._limiter: anyio.CapacityLimiter | None = None
        # The calls' intents and acceptances, committed in groups on the same worker
        # connection (``chit.reconcile.group``).
        self.group = GroupCommit(
            store, lambda: self.batch_store, self._thread_limiter, self._hold_feed, self.clock
        )
        # Checks that saw nothing new, held in memory and written together (behind.py).
        self.behind = WriteBehind()
        self.transactions = 0
        self.skipped = 0

    @property
    def redactor(self) -> RedactorFor | None:
        """Gives each receipt's redactor; None stores server text as it came."""
        return self._folder.redactor

    @redactor.setter
    def redactor(self, redactor: RedactorFor | None) -> None:
        self._folder.redactor = redactor

    @property
    def digest_key(self) -> bytes | None:
        """Derives the keys of input requests whose server key holds a secret."""
        return self._folder.digest_key

    def announced_through(self) -> int | None:
        """How far a reader of the change cursor may go; None: as far as it likes.

        While a batch runs in the worker thread, its changes may be committed before
        their callbacks run: every change numbered above the returned one may be such a
        change. Changes up to it were committed before the batch began (its own take
        higher numbers under the write lock).
        """
        return min(self._floors.values()) if self._floors else None

    def _thread_limiter(self) -> anyio.CapacityLimiter:
        """One commit at a time on ``batch_store`` (batches and groups alike)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return self._limiter

    def _hold_feed(self) -> Callable[[], None]:
        """Hold the change feed at the cursor of now; return the function releasing it."""
        try:
            floor = self.store.receipts.change_cursor()
        except StoreError:
            floor = 0  # a feed then waits for this commit's callbacks
        self._floor_ids += 1
        key = self._floor_ids
        self._floors[key] = floor

        def release() -> None:
            self._floors.pop(key, None)

        return release

    async def aclose(self) -> None:
        """Write the checks held in memory, wait for the batch and the group in flight,
        then close ``batch_store`` (later batches and groups commit on the loop, through
        ``store``)."""
        await self.flush_behind()
        while self._leading or self.group.leading:
            await self.group.drain()
            while self._leading:
                if self._drained is None:
                    self._drained = anyio.Event()
                await self._drained.wait()
        batch_store, self.batch_store = self.batch_store, None
        if batch_store is not None:
            # Taken like every use of it in the thread: nothing still runs on it there.
            with anyio.CancelScope(shield=True):
                async with self._thread_limiter():
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

    def follow(self, callback: Callable[[Receipt | None, Receipt], None]) -> None:
        """Call ``callback(before, after)`` (cheap, never raising) after every committed
        change: what this process wrote, known without reading the store again."""
        self._followers.append(callback)

    def notify(self, before: Receipt | None, after: Receipt, changes: tuple[str, ...]) -> None:
        """Tell the subscriber about a change (its exceptions never reach the engine)."""
        waiting = self._changed.pop(after.receipt_id, None)
        if waiting is not None:
            waiting.set()
        for follower in self._followers:
            follower(before, after)
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
        item = PendingWrite(receipt_id, tuple(events), None, False, wipe_handle)
        item.carried = self.behind.take(receipt_id)
        result = write_alone(item, self.store, self._folder.write)
        self.transactions += 1
        self._announce(item)
        return result

    # --- batched writes ----------------------------------------------------------------

    async def submit(
        self,
        receipt_id: str,
        events: Sequence[Event],
        *,
        base: Receipt | None = None,
        skip_freshness: bool = False,
        behind: bool = False,
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
            behind: hold the write in memory when the events only refresh
                ``FRESHNESS`` (needs ``base``; see :mod:`chit.reconcile.behind`): no
                commit now, the receipt returned as the checks will see it.

        Returns:
            The receipt as stored afterwards.

        Raises:
            RecordNotFound, StaleWrite, StoreError: this receipt's write failed (the
                others in the batch are not affected).
        """
        item = PendingWrite(receipt_id, tuple(events), base, skip_freshness)
        if self.batch_window_s <= 0:
            return self.apply(receipt_id, events)
        if self.batch_store is not None or behind:
            item.redactor = self._folder.redactor_on_loop(item)
        if behind and base is not None:
            held = self._hold(item, base)
            if held is not None:
                return held
        item.carried = self.behind.take(receipt_id)
        self._queue.append(item)
        if self._leading:
            item.done = anyio.Event()  # no await since it was queued: not finished yet
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

    def _hold(self, item: PendingWrite, base: Receipt) -> Receipt | None:
        """Fold ``item`` on the loop; if it moves only freshness, hold it in memory and
        return the receipt as the checks see it (None: it goes to a batch)."""
        folded = self._folder.fold(item, base, self.store)
        current, observations, changes = folded
        if not FRESHNESS.issuperset(changes):
            item.folded = (base, folded)  # the batch writes it without folding again
            return None
        if item.skip_freshness:  # a hint that found nothing new: as the batch would
            self.skipped += 1
            return base
        if current is base:  # nothing moved: the batch writes any bare observations
            item.folded = (base, folded)
            return None if observations else base
        shift = self._folder.jitter(base, current)
        held = self.behind.hold(base, current, observations, self.clock.monotonic(), shift)
        self.notify(base, held, tuple(dict.fromkeys(changes)))
        return held

    async def flush_behind(self) -> None:
        """Write every check held in memory, a chunk per transaction (see ``behind.py``);
        while another task's flush runs, wait for it first.

        A failed chunk loses only freshness: logged, and its receipts look older until
        their next check. Followers hear each receipt written (its new version).
        """
        behind = self.behind
        while behind.flushing:
            # Another task's flush (the reconciler's tick): wait for it, then write what
            # is left. Returning at once let ``aclose`` close the worker connection
            # under the chunk that flush was writing in the thread (a SIGSEGV in
            # sqlite3_changes64: the UPDATE ended on a closed handle).
            if self._flush_ended is None:
                self._flush_ended = anyio.Event()
            await self._flush_ended.wait()
        behind.flushing = True
        try:
            with anyio.CancelScope(shield=True):
                while behind.pending:
                    await self._flush_chunk(behind.chunk())
        finally:
            behind.flushing = False
            ended, self._flush_ended = self._flush_ended, None
            if ended is not None:
                ended.set()

    async def _flush_chunk(self, entries: list[Behind]) -> None:
        batch_store = self.batch_store
        release = self._hold_feed()
        try:
            if batch_store is None:
                stored = write_chunk(entries, self.store)
            else:
                stored = await in_thread(
                    self.clock, write_chunk, entries, batch_store, limiter=self._thread_limiter()
                )
            self.transactions += 1
        except Exception:
            log.warning("writing %d held checks failed", len(entries), exc_info=True)
            stored = [None] * len(entries)
        finally:
            release()
        for entry, doc in zip(entries, stored, strict=True):
            now_held = self.behind.landed(entry, doc)
            if now_held is not None:
                for follower in self._followers:
                    follower(entry.receipt, now_held)
        for watcher in self._watchers:
            watcher()

    async def _flush(self, batch: list[PendingWrite]) -> None:
        """Commit ``batch`` (in the worker thread when there is a ``batch_store``), then
        resolve its writes and announce its changes, on the loop, in order."""
        batch_store = self.batch_store
        if batch_store is None:
            self.transactions += commit_batch(batch, self.store, self._folder.write)
            self._announce_batch(batch)
            return
        release = self._hold_feed()
        try:
            self.transactions += await in_thread(
                self.clock,
                commit_batch,
                batch,
                batch_store,
                self._folder.write,
                limiter=self._thread_limiter(),
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
                        item.result = write_alone(item, self.store, self._folder.write)
                        self.transactions += 1
                    except Exception as exc:
                        item.error = exc
        finally:
            # Released first, then announced with no await between: a feed pumped by an
            # announcement reads this batch's changes at once, and nothing can read them
            # before their announcements.
            release()
            self._announce_batch(batch)

    def _announce_batch(self, batch: list[PendingWrite]) -> None:
        for item in batch:
            if item.error is None:
                if item.skipped:
                    self.skipped += 1
                self._announce(item)
            if item.done is not None:
                item.done.set()

    def _announce(self, item: PendingWrite) -> None:
        if item.notice is not None:
            self.notify(*item.notice)
            item.notice = None


__all__ = [
    "BATCH_WINDOW_S",
    "FRESHNESS",
    "JITTER",
    "MAX_BATCH",
    "ChangeCallback",
    "ReceiptWriter",
    "RedactorFor",
]
