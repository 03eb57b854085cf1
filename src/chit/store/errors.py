"""Typed store errors, and the one place raw ``sqlite3`` errors are classified.

Callers never see a bare ``sqlite3.OperationalError``: they get a ``StoreError`` subclass
that says whether retrying can help (``transient``), so the reconciler and the sidecar's
executor can pick a failure class without parsing message prose.
"""

from __future__ import annotations

import sqlite3

from chit.errors import ChitError, Conflict, ExitCode, NotFound, UsageError


class StoreError(ChitError):
    """Any failure of the SQLite store (exit code ``STORE``)."""

    exit_code = ExitCode.STORE
    #: True when the same operation may succeed if retried later.
    transient: bool = False


class StoreBusy(StoreError):
    """Another process held the write lock for longer than the busy timeout."""

    transient = True


class StoreIOError(StoreError):
    """The disk failed or is full; SQLite rolled the transaction back.

    An I/O error raised *at COMMIT* leaves the outcome unknown: resolve it by request key
    or receipt id (idempotency), never by assuming the write did or did not happen.
    """

    transient = True


class StoreCorrupt(StoreError):
    """The database file is damaged or is not a chit database."""


class StoreTooNew(StoreError):
    """The database was written by a newer chit whose schema this version does not know."""


class StaleWrite(StoreError):
    """Optimistic concurrency: someone else updated the row since it was read.

    Re-read the row, re-apply the change and try again.
    """

    exit_code = ExitCode.CONFLICT
    transient = True


class RecordNotFound(NotFound):
    """No receipt, intent or work record with that id."""


class AlreadyExists(Conflict):
    """A row with that primary key (or unique request key) already exists."""


class AmbiguousPrefix(UsageError):
    """A short id matches more than one receipt."""


_BUSY = ("database is locked", "database is busy", "database table is locked")
_CORRUPT = ("malformed", "not a database", "file is encrypted", "corrupt")
_IO = ("disk i/o error", "disk is full", "unable to open database")


def classify(exc: sqlite3.Error) -> StoreError | None:
    """Map a raw ``sqlite3`` error to a typed store error, or ``None`` if it is a bug.

    Integrity and programming errors are not classified: they mean a caller broke an
    invariant, and the original exception is the most useful report.
    """
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return None
    text = str(exc).lower()
    if any(marker in text for marker in _BUSY):
        return StoreBusy(f"the chit store is busy (another process is writing): {exc}")
    if any(marker in text for marker in _CORRUPT):
        return StoreCorrupt(f"the chit store is damaged: {exc}")
    if any(marker in text for marker in _IO):
        return StoreIOError(f"the chit store could not be written: {exc}")
    if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
        return StoreError(f"the chit store failed: {exc}")
    return None
