"""The transactions around receipt writes: one receipt alone, or a batch of them.

A batch commits in **one** ``BEGIN IMMEDIATE`` transaction, so a burst of checks costs
one fsync (``synchronous=FULL`` stays) instead of one each. Each receipt's write is a
savepoint inside it — all or nothing per receipt — and a receipt that fails (a
``StaleWrite``, a ``Conflict``) is rolled back alone; the others commit. A ``StaleWrite``
is read again and retried once in the same transaction (under its write lock), then, if
still stale, in a transaction of its own. Nothing here
announces or resolves a write: it may run in the writer's worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from chit.receipts import Receipt
from chit.reconcile.fold import NeedsLoop, PendingWrite
from chit.store import StaleWrite, Store, immediate
from chit.store.db import translated

MAX_ATTEMPTS = 8
"""How often a write alone re-reads a receipt that keeps changing under it."""

Write = Callable[[PendingWrite, Store], Receipt]
"""Folds and writes one receipt inside the current transaction (``Folder.write``)."""


def write_alone(item: PendingWrite, store: Store, write: Write) -> Receipt:
    """``item`` in a transaction of its own through ``store``, re-read while stale.

    Raises:
        StaleWrite: the receipt kept changing; given up after :data:`MAX_ATTEMPTS`.
    """
    item.base = None
    for _attempt in range(MAX_ATTEMPTS):
        try:
            with immediate(store.db):
                result = write(item, store)
        except StaleWrite:
            item.base = None
            continue  # someone else wrote in between: re-read and re-apply
        return result
    raise StaleWrite(f"receipt {item.receipt_id} kept changing; gave up after {MAX_ATTEMPTS} tries")


def commit_batch(batch: list[PendingWrite], store: Store, write: Write) -> int:
    """Write ``batch`` in one transaction through ``store``; the transactions it took.

    Each item ends with ``result`` or ``error`` set, or ``on_loop`` when only the event
    loop can write it.
    """
    transactions = 0
    retry: set[int] = set()
    try:
        with immediate(store.db):
            for item in batch:
                if not _in_batch(item, store, write):
                    # Read again under this transaction's write lock (nobody can write
                    # in between): usually a write-behind flush that landed while the
                    # check was asking. Not a transaction of its own, as it was.
                    item.base = None
                    if not _in_batch(item, store, write):
                        retry.add(id(item))
    except Exception as exc:
        # The batch's COMMIT failed (disk full, I/O error): no write of it is known to
        # have landed; every check sees the error and is retried by the schedule.
        for item in batch:
            item.error, item.result, item.notice = exc, None, None
    else:
        transactions += 1
    for item in batch:
        if id(item) in retry:
            # Re-written on its own: its outcome is this write's, not the batch's (a failed
            # batch COMMIT set ``error`` on it too; the retry may well land).
            item.error = None
            try:
                item.result = write_alone(item, store, write)
                transactions += 1
            except NeedsLoop:
                item.on_loop = True
            except Exception as exc:
                item.error = exc
    return transactions


def _in_batch(item: PendingWrite, store: Store, write: Write) -> bool:
    """Write ``item`` in a savepoint of the batch's transaction; False when stale."""
    try:
        with savepoint(store):  # per-receipt atomicity in the batch
            item.result = write(item, store)
    except StaleWrite:
        return False
    except NeedsLoop:
        item.on_loop = True
    except Exception as exc:
        item.error = exc
    return True


@contextmanager
def savepoint(store: Store) -> Iterator[None]:
    """One receipt's write inside the batch: undone alone if it fails.

    Plain SQL rather than sqlite-utils' ``atomic()`` (a random name and a generator per
    receipt): this runs once per check.
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


__all__ = ["MAX_ATTEMPTS", "commit_batch", "savepoint", "write_alone"]
