"""Opening the SQLite file safely, and the transaction helpers every repository uses.

Settings and their reasons (measured in ``notes/reliability.md`` §2):

* ``journal_mode=WAL`` — readers never block the writer; persistent in the file, so it
  is set once, when the file is new (or was left in another mode).
* ``synchronous=FULL`` — a receipt is a durability promise; WAL+NORMAL can lose the last
  commits on power loss. It costs ~2.7x in raw throughput, still far above need.
* ``foreign_keys=ON`` — off by default on every connection, so set on every connection.
* busy timeout 15 s — the busy handler is not fair: one writer was starved for ~3 s.
* ``journal_size_limit`` — a WAL that grew during a burst is truncated back afterwards.
* ``auto_vacuum=INCREMENTAL`` — pages freed by ``chit prune`` can be given back to the
  file system (``PRAGMA incremental_vacuum``) without rewriting the whole file.
* Every write runs in ``BEGIN IMMEDIATE`` (``immediate()``): a deferred read-then-write
  fails at once with ``SQLITE_BUSY_SNAPSHOT``, ignoring the busy timeout.
* Reads are short: fetch all rows, then return. A cursor kept open across calls pins the
  WAL (91 MB after 20k inserts, measured).

Connections are bound to the thread that opened them (``check_same_thread``): open one
per thread (``Store.open`` is cheap) or use ``chit.store.ThreadLocalStore``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import sqlite_utils

from chit.home import ensure_private_dir, ensure_private_file
from chit.store.errors import StoreError, classify

BUSY_TIMEOUT_S = 15.0
JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024
SIDE_FILE_SUFFIXES = ("-wal", "-shm", "-journal")

Params = Sequence[Any] | dict[str, Any]


def connect(
    path: Path, *, timeout: float = BUSY_TIMEOUT_S, check_same_thread: bool = True
) -> sqlite_utils.Database:
    """Open (creating if needed) the database at ``path`` with chit's settings.

    The directory is made 0700 and the file 0600 *before* SQLite touches it, so the
    ``-wal``/``-shm`` files SQLite creates inherit 0600 from the main file.

    Raises:
        StoreError: (or a subclass) if the file cannot be opened or configured.
    """
    ensure_private_dir(path.parent)
    ensure_private_file(path)
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(str(path), timeout=timeout, check_same_thread=check_same_thread)
        # execute_plugins=False: chit loads no sqlite-utils plugins, and skipping the
        # entry-point scan keeps a per-thread open cheap.
        db = sqlite_utils.Database(conn, execute_plugins=False)
        configure(db)
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        typed = classify(exc)
        if typed is None:
            raise
        raise typed from exc
    tighten_side_files(path)
    return db


def configure(db: sqlite_utils.Database) -> None:
    """Apply the per-connection pragmas, and switch the file to WAL if it is not yet."""
    conn = db.conn
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        # Only a new, empty file can take it (before its first table, before WAL); an
        # older file is converted by ``chit prune`` (a VACUUM). Asked on an existing
        # file it would wait for the write lock.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")


def tighten_side_files(path: Path) -> None:
    """Make any existing ``-wal``/``-shm`` files 0600 (belt and braces over inheritance)."""
    for suffix in SIDE_FILE_SUFFIXES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            ensure_private_file(side)


def _typed(exc: sqlite3.Error) -> Exception:
    typed = classify(exc)
    return typed if typed is not None else exc


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise raw ``sqlite3`` errors from the block as typed ``StoreError``s."""
    try:
        yield
    except sqlite3.Error as exc:
        typed = classify(exc)
        if typed is None:
            raise
        raise typed from exc


def _rollback_quietly(db: sqlite_utils.Database) -> None:
    # A failed rollback (connection already broken) must not mask the original error;
    # SQLite has rolled back on its own in that case.
    with suppress(sqlite3.Error):
        db.rollback()


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run the block as one write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``.

    Takes the write lock up front (waiting up to the busy timeout), commits on success
    and rolls back on any exception. Nested use becomes a savepoint of the outer
    transaction, so repository methods compose.

    Raises:
        StoreBusy: the write lock was not obtained within the busy timeout.
        StoreIOError: the disk failed; at COMMIT the outcome is unknown.
    """
    conn = db.conn
    if conn.in_transaction:
        with translated(), db.atomic():
            yield db
        return
    # BEGIN goes to the connection directly: sqlite-utils' ``execute`` wrapper (keyword
    # parsing, implicit-commit bookkeeping) cost more CPU than the statements on the
    # receipt write path, and transaction control needs none of it.
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        typed = classify(exc)
        if typed is None:
            raise
        raise typed from exc
    try:
        yield db
    except BaseException as exc:
        _rollback_quietly(db)
        if isinstance(exc, sqlite3.Error) and classify(exc) is not None:
            raise _typed(exc) from exc
        raise
    try:
        db.commit()
    except BaseException as exc:
        _rollback_quietly(db)
        if isinstance(exc, sqlite3.Error) and classify(exc) is not None:
            raise _typed(exc) from exc
        raise


@contextmanager
def snapshot(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """Run several reads against one consistent snapshot, then end it at once.

    Use only around fetch-everything reads; never yield rows out of the block lazily.
    """
    if db.conn.in_transaction:
        with translated():
            yield db
        return
    with translated():
        db.execute("BEGIN")
    try:
        with translated():
            yield db
    finally:
        _rollback_quietly(db)  # read-only: ending it by rollback is cheapest


def fetch_all(db: sqlite_utils.Database, sql: str, params: Params = ()) -> list[sqlite3.Row]:
    """Run one query and return every row at once (the statement ends before returning)."""
    with translated():
        cursor = db.conn.cursor()
        # Row access by name, set per cursor so sqlite-utils' own queries are unaffected.
        cursor.row_factory = sqlite3.Row
        try:
            cursor.execute(sql, params)
            rows: list[sqlite3.Row] = cursor.fetchall()
        finally:
            cursor.close()
    return rows


def fetch_one(db: sqlite_utils.Database, sql: str, params: Params = ()) -> Any:
    """Run one query and return its first row (or ``None``), closing the cursor."""
    rows = fetch_all(db, sql, params)
    return rows[0] if rows else None


def write(db: sqlite_utils.Database, sql: str, params: Params = ()) -> sqlite3.Cursor:
    """Execute one write statement; must run inside ``immediate()``.

    Raises:
        StoreError: if called outside a transaction (a programming error: every write
            goes through ``BEGIN IMMEDIATE``).
    """
    if not db.conn.in_transaction:
        raise StoreError("internal: write outside BEGIN IMMEDIATE: " + sql.split("(")[0])
    return db.conn.execute(sql, params)


def quick_check(db: sqlite_utils.Database) -> list[str]:
    """Return ``PRAGMA quick_check`` lines (``["ok"]`` when the file is sound)."""
    return [str(row[0]) for row in fetch_all(db, "PRAGMA quick_check")]
