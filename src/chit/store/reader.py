"""The read commands' store: a plain sqlite3 connection and the reads, no sqlite-utils.

``chit receipts``, ``show`` and ``export`` read a few rows and print them. Opening the
full :class:`~chit.store.Store` for that imported sqlite-utils (and click, pluggy and
dateutil with it: a quarter of a second of a cold ``chit receipts`` on a home with one
receipt) for migrations and write helpers that reading a current store never uses.
:class:`StoreReader` opens the file as ``Store.open_readonly`` does
(:func:`~chit.store.readonly.open_readonly`: nothing is created or written) and reads
through the same repository code, whose reads go through ``fetch_all``/``fetch_one``
alone — they need the connection and nothing else.

A store that is not exactly current (:func:`~chit.store.schema_check.is_current`, the
check ``Store.open_readonly`` makes too) — from an older chit (it is migrated first),
from a newer one, or one that check cannot read — is not opened here: :meth:`StoreReader.open`
returns None and the caller opens ``Store.open_readonly``, which decides and reports as
always.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, cast

from chit.store.db import BUSY_TIMEOUT_S
from chit.store.observation_repo import ObservationRepository
from chit.store.readonly import open_readonly
from chit.store.receipt_pages import ReceiptPages
from chit.store.rewrite import TextRewriter
from chit.store.schema_check import is_current, schema_version

if TYPE_CHECKING:
    import sqlite_utils


class _Connection:
    """The part of ``sqlite_utils.Database`` the repositories' reads use: ``conn``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class ReceiptReader(ReceiptPages):
    """Pages of receipts and the lookup by id or prefix, over a reader's connection."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db


class StoreReader:
    """A current store opened to read receipts, their timelines and the sweep mark.

    Its repositories are the store's own; a write through them fails (the connection is
    ``query_only``) — it has no other use than reading.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, schema_version: int) -> None:
        """Read through ``conn`` (from ``open_readonly``; use :meth:`open`)."""
        self.path = path
        self.schema_version = schema_version
        self._conn = conn
        # Typed for sqlite-utils' Database, the repositories read only its ``conn``.
        db = cast("sqlite_utils.Database", _Connection(conn))
        self.receipts = ReceiptReader(db)
        self.observations = ObservationRepository(db)
        self.rewriter = TextRewriter(db)

    @classmethod
    def open(cls, path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> StoreReader | None:
        """Open the store file ``path`` to read, or None unless its schema is current.

        Raises:
            StoreError: (or a subclass) as ``open_readonly``: the file cannot be read.
        """
        conn = open_readonly(path, timeout=timeout)
        if not is_current(conn):
            conn.close()
            return None
        return cls(conn, path, schema_version())

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
