"""Opening a store to read only: nothing is created, migrated, chmodded or written.

``chit receipts``, ``show``, ``export`` and ``doctor`` must work on a home they cannot
write — a read-only mount, a backup, someone else's snapshot — and must not change one
they can. So they open the file with ``mode=ro`` and ``query_only``. On a read-only file
system SQLite cannot create the WAL index (``-shm``) a WAL database needs, and
``mode=ro`` fails with "unable to open database file"; then, if there is no write-ahead
log with unapplied commits, the file is complete and is opened ``immutable=1`` (nobody
can be writing a read-only mount).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from chit.store.db import BUSY_TIMEOUT_S, check_file, file_uri
from chit.store.errors import StoreError, StoreIOError, classify

if TYPE_CHECKING:
    import sqlite_utils


def _wal_has_content(path: Path) -> bool:
    try:
        return os.stat(path.with_name(path.name + "-wal")).st_size > 0
    except FileNotFoundError:
        return False


def _open(uri: str, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, timeout=timeout)
    try:
        conn.execute("PRAGMA query_only=ON")
        # Touch the file now: a WAL database fails here, not at the first real query.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def open_readonly(path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """Open the existing database ``path`` for reading only: a plain sqlite3 connection.

    Raises:
        StoreError: (or a subclass) it is not a regular file, cannot be opened, is
            damaged, or sits on a read-only file system with unapplied WAL commits.
    """
    check_file(path)
    try:
        try:
            return _open(file_uri(path, "ro"), timeout)
        except sqlite3.OperationalError as exc:
            if "unable to open" not in str(exc).lower() or not path.exists():
                raise
            if _wal_has_content(path):
                raise StoreError(
                    f"cannot read the store {path}: its write-ahead log holds commits not yet "
                    "applied and its directory cannot be written; open it once where it is "
                    "writable"
                ) from None
            return _open(file_uri(path, "ro", immutable="1"), timeout)
    except sqlite3.Error as exc:
        typed = classify(exc)
        if typed is None:
            raise
        if isinstance(typed, StoreIOError):  # its message speaks of writing
            typed = StoreError(f"cannot read the store {path}: {exc}")
        raise typed from exc


def connect_readonly(path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite_utils.Database:
    """:func:`open_readonly` as the ``sqlite_utils.Database`` a full ``Store`` works on.

    Raises:
        StoreError: as :func:`open_readonly`.
    """
    import sqlite_utils

    return sqlite_utils.Database(open_readonly(path, timeout=timeout), execute_plugins=False)
