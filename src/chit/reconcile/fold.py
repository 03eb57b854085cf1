"""Folding one receipt's events and writing the result, inside a caller's transaction.

A write reads the receipt (or takes the base a check read), redacts server text
(``chit.reconcile.boundary``), folds the events through ``transitions.apply`` and writes
the result guarded by the version it read, so a concurrent writer makes it fail with
``StaleWrite`` (the caller re-reads and re-folds) instead of being overwritten. The
transactions around it are :mod:`chit.reconcile.transactions`'; the batching, the worker
thread and the change callbacks are :class:`chit.reconcile.writer.ReceiptWriter`'s.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import anyio

from chit.clock import Clock
from chit.receipts import Event, Observation, Receipt, apply
from chit.reconcile.behind import Behind, write_rows
from chit.reconcile.boundary import carries_text, redact_events
from chit.redaction import Redactor
from chit.store import Store, StoreError
from chit.store.db import write
from chit.store.observation_repo import append_rows
from chit.store.receipt_rows import FRESHEN, freshen_params

RedactorFor = Callable[[Receipt], Redactor]
Folded = tuple[Receipt, list[Observation], list[str]]
"""A fold's result: the receipt after the events, their observations, changed fields."""
"""The redactor for a receipt's server text (``HandleBook.redactor``)."""

JITTER = 0.1
"""Each scheduled check moves later by up to 10 % of its interval, so tasks created together
do not all poll in the same instant."""

FRESHNESS = frozenset({"status_at", "next_check_at", "stale_after"})
"""Fields a check that saw nothing new still moves: bookkeeping, not news."""


@dataclass(eq=False)
class PendingWrite:
    """One receipt's events on their way to the store, and what became of them."""

    receipt_id: str
    events: tuple[Event, ...]
    base: Receipt | None
    skip_freshness: bool
    wipe_handle: bool = False
    # Made only for a write that waits on another's batch (most are led by their own
    # check's submit and need none): an event per write was a measurable part of a check.
    done: anyio.Event | None = None
    result: Receipt | None = None
    error: BaseException | None = None
    notice: tuple[Receipt, Receipt, tuple[str, ...]] | None = None
    redactor: Redactor | None = None  # found on the loop (it may read the loop's store)
    skipped: bool = False
    on_loop: bool = False  # must be written on the loop (no redactor could be found)
    carried: Behind | None = None  # this receipt's checks held in memory, written first
    # (base, fold) of a fold already made on the loop (``ReceiptWriter._hold``), reused
    # when the write folds on that same base: one fold per news check, not two.
    folded: tuple[Receipt, Folded] | None = None


class NeedsLoop(Exception):
    """A write in the worker thread needs what only the loop can do (find its redactor)."""


@dataclass(eq=False)
class Folder:
    """Folds and writes one receipt at a time (see the module docstring).

    Attributes:
        loop_store: the event loop's connection; a write through any other (the worker
            thread's) cannot look up a redactor and raises :class:`NeedsLoop`.
        redactor: gives each receipt's redactor; None stores server text as it came.
        digest_key: derives the keys of input requests whose server key holds a secret.
    """

    loop_store: Store
    redactor: RedactorFor | None
    digest_key: bytes | None
    clock: Clock
    rng: random.Random = field(default_factory=random.Random)

    def redactor_on_loop(self, item: PendingWrite) -> Redactor | None:
        """``item``'s redactor, found on the loop before its batch leaves it."""
        # The redactor may open the receipt's handle, reading the loop's connection.
        if self.redactor is None or not any(carries_text(e) for e in item.events):
            return None
        receipt = item.base
        if receipt is None:
            try:
                receipt = self.loop_store.receipts.get(item.receipt_id)
            except StoreError:
                receipt = None
        return self.redactor(receipt) if receipt is not None else None

    def write(self, item: PendingWrite, store: Store) -> Receipt:
        """Fold and write one receipt inside the caller's transaction on ``store``.

        Raises:
            NeedsLoop: in the worker thread, server text to redact and no redactor
                found on the loop (the receipt appeared after ``submit`` looked).
            StaleWrite: the receipt changed since it was read.
        """
        item.notice = None
        item.skipped = False
        before = _current(item, store)
        if item.carried is not None:  # held checks first: the timeline's order
            write_rows(store, item.carried.rows)
        folded = item.folded
        if folded is not None and folded[0] is before:
            current, observations, changes = folded[1]
        else:
            current, observations, changes = self.fold(item, before, store)
        fresh_only = FRESHNESS.issuperset(changes)
        if item.skip_freshness and fresh_only:
            item.skipped = True
            return before
        if current is before:
            if observations:
                store.observations.append(*observations)
            return before
        current = self._jitter(before, current)
        if fresh_only and not item.wipe_handle and current.version == before.version + 1:
            stored = _freshen(store, current, before.version, observations)
        else:
            stored = store.receipts.update(
                current,
                observations,
                expected_version=before.version,
                wipe_handle=item.wipe_handle,
            )
        item.notice = (before, stored, tuple(dict.fromkeys(changes)))
        return stored

    def fold(self, item: PendingWrite, before: Receipt, store: Store) -> Folded:
        """``item``'s events folded on ``before`` (server text redacted first): the
        receipt after them, their observations, the fields they changed.

        Raises:
            NeedsLoop: through a store other than the loop's, with server text to redact
                and no redactor found on the loop.
        """
        now = self.clock.now()
        current = before
        observations: list[Observation] = []
        changes: list[str] = []
        events: Sequence[Event] = item.events
        if self.redactor is not None and any(carries_text(e) for e in events):
            redactor = item.redactor
            if redactor is None:
                if store is not self.loop_store:
                    raise NeedsLoop(item.receipt_id)
                redactor = self.redactor(before)
            events = redact_events(events, redactor, self.digest_key)
        for event in events:
            step = apply(current, event, now)
            observations.append(step.observation)
            changes.extend(step.changes)
            current = step.receipt
        return current, observations, changes

    def jitter(self, before: Receipt, after: Receipt) -> dict[str, datetime]:
        """The update moving ``after``'s next check later by up to ``JITTER`` of its
        interval (empty when it stays): merged by the caller into a copy it makes anyway
        (``WriteBehind.hold``), one copy of the receipt per held check instead of two."""
        nxt = after.next_check_at
        if nxt is None or after.is_terminal or nxt == before.next_check_at:
            return {}
        span = (nxt - self.clock.now()).total_seconds()
        if span <= 0:
            return {}
        # Only later, never sooner: the floor of the poll interval stays a floor.
        shift = self.rng.uniform(0.0, JITTER) * span
        return {"next_check_at": nxt + timedelta(seconds=shift)}

    def _jitter(self, before: Receipt, after: Receipt) -> Receipt:
        update = self.jitter(before, after)
        return after.model_copy(update=update) if update else after


def _freshen(
    store: Store, receipt: Receipt, expected: int, observations: Sequence[Observation]
) -> Receipt:
    """Write a check that saw nothing new: the bookkeeping columns and the document.

    The common check (a live task as it was): ``ReceiptRepository.update`` would rebind
    every column and open a savepoint of its own inside the caller's (a fresh statement
    name each time); this moves what changed, inside the caller's transaction, and its
    repeat lands on the timeline's last row as ever. The document is serialised whole,
    so it stays exactly what ``update`` would store. A miss (someone else wrote) is
    handed to ``update``, which says why (``StaleWrite``, ``RecordNotFound``).
    """
    if write(store.db, FRESHEN, freshen_params(receipt, expected)).rowcount != 1:
        return store.receipts.update(receipt, observations, expected_version=expected)
    append_rows(store.db, observations)
    return receipt


def _current(item: PendingWrite, store: Store) -> Receipt:
    # The base a check read is folded on without reading its version again: the UPDATE
    # is guarded by that version, so a receipt someone changed meanwhile fails it
    # (StaleWrite) and is re-read and re-folded on its own (transactions.commit_batch).
    if item.base is not None:
        return item.base
    return store.receipts.require(item.receipt_id)


__all__ = ["FRESHNESS", "JITTER", "Folder", "NeedsLoop", "PendingWrite", "RedactorFor"]
