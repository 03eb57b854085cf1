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

A new file is never visible half-built: ``create_complete`` builds the schema in a
private temporary file beside it and links it into place, so whoever opens the path —
another chit process, a test, ``sqlite3`` by hand — finds either nothing or the whole
schema (a reader once saw ``no such table: intents`` in the window between a plain
create and the first migration).

Connections are bound to the thread that opened them (``check_same_thread``): open one
per thread (``Store.open`` is cheap) or use ``chit.store.ThreadLocalStore``.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chit.files import NotRegularFile, check_regular, unwritable_reason
from chit.home import ensure_private_dir, ensure_private_file
from chit.store.errors import StoreError, StoreIOError, classify

if TYPE_CHECKING:
    # Imported where a connection is made (``connect``, ``create_complete``): the read
    # commands read through a plain sqlite3 connection (``chit.store.reader``) and never
    # load sqlite-utils, which pulls click, pluggy and dateutil in with it.
    import sqlite_utils

BUSY_TIMEOUT_S = 15.0
JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024
SIDE_FILE_SUFFIXES = ("-wal", "-shm", "-journal")

Params = Sequence[Any] | dict[str, Any]


def connect(
    path: Path,
    *,
    timeout: float = BUSY_TIMEOUT_S,
    check_same_thread: bool = True,
    build: Callable[[sqlite_utils.Database], object] | None = None,
) -> sqlite_utils.Database:
    """Open the database at ``path`` with chit's settings, creating it complete if missing.

    A missing file is created by :func:`create_complete` with ``build`` (the schema), so
    it appears 0600 with its whole schema or not at all. The directory is made 0700 when
    created (an existing one must already be private).

    Raises:
        StoreError: (or a subclass) if the file cannot be created, opened or configured.
    """
    ensure_private_dir(path.parent)
    check_file(path)
    if not path.exists():
        create_complete(path, build or (lambda db: None))
    ensure_private_file(path)
    conn: sqlite3.Connection | None = None
    try:
        # mode=rw: never let SQLite create a file of its own (0644, no schema) here.
        conn = sqlite3.connect(
            file_uri(path, "rw"), uri=True, timeout=timeout, check_same_thread=check_same_thread
        )
        import sqlite_utils

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
        reason = unwritable_reason(path.parent)
        if reason is not None:  # say what is wrong with the place, not the file
            raise StoreIOError(f"the chit store {path} cannot be written: {reason}") from exc
        raise typed from exc
    tighten_side_files(path)
    return db


def check_file(path: Path) -> None:
    """Refuse a database path that is a FIFO, device or directory (SQLite would hang on a
    FIFO, or report a misleading "disk I/O error").

    Raises:
        StoreError: ``path`` exists and is not a regular file.
    """
    try:
        check_regular(path)
    except NotRegularFile as exc:
        raise StoreError(f"cannot open the store {path}: {exc.strerror}") from None


def file_uri(path: Path, mode: str, **extra: str) -> str:
    """A ``file:`` URI for ``path`` (quoted: ``?`` and ``#`` are legal in file names)."""
    query = "&".join([f"mode={mode}", *(f"{k}={v}" for k, v in extra.items())])
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{query}"


def create_complete(path: Path, build: Callable[[sqlite_utils.Database], object]) -> bool:
    """Create the database ``path`` with its schema, all at once; False if it appeared first.

    The schema is built by ``build`` in a fresh 0600 temporary file in the same directory
    (rollback journal, ``synchronous=FULL``), the file is switched to WAL and closed, then
    hard-linked to ``path`` — which fails if ``path`` exists, so two processes creating a
    home at once never replace each other's file (the loser's copy is discarded).

    Raises:
        StoreError: (or a subclass) if the file cannot be built or put in place.
    """
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    except OSError as exc:
        reason = unwritable_reason(path.parent) or exc.strerror or str(exc)
        raise StoreIOError(f"cannot create {path}: {reason}") from exc
    os.close(fd)
    tmp = Path(name)
    import sqlite_utils

    try:
        conn = sqlite3.connect(str(tmp), timeout=BUSY_TIMEOUT_S)
        try:
            db = sqlite_utils.Database(conn, execute_plugins=False)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table
            with translated():
                build(db)
                # Last: the WAL flag lives in the header; the log itself stays empty.
                conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        return _publish(tmp, path)
    except sqlite3.Error as exc:
        raise _typed(exc) from exc
    except OSError as exc:
        raise StoreIOError(f"cannot create {path}: {exc.strerror or exc}") from exc
    finally:
        for leftover in (tmp, *(tmp.with_name(tmp.name + s) for s in SIDE_FILE_SUFFIXES)):
            with suppress(OSError):
                leftover.unlink()


_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


def _publish(tmp: Path, path: Path) -> bool:
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # A file system without hard links: rename instead (a concurrent creator could
        # then replace ours, a window of microseconds on an unusual setup).
        if path.exists():
            return False
        os.replace(tmp, path)
    _fsync_dir(path.parent)
    return True


def _fsync_dir(directory: Path) -> None:
    # Durability of the new name; a platform that cannot open a directory only loses
    # durability of the link, never consistency.
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


class _Immediate:
    """The context manager :func:`immediate` returns (a class: a generator-based one
    cost a few µs per transaction, measurable on the receipt and openWork paths)."""

    __slots__ = ("_db", "_nested")

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db
        self._nested = False

    def __enter__(self) -> sqlite_utils.Database:
        db = self._db
        # BEGIN and SAVEPOINT go to the connection directly: sqlite-utils' ``execute``
        # wrapper (keyword parsing, implicit-commit bookkeeping) cost more CPU than the
        # statements on the receipt write path, and transaction control needs none of it.
        try:
            if db.conn.in_transaction:
                # Nested: a savepoint of the outer transaction. One fixed name (SQLite
                # resolves a repeated name to the innermost), not sqlite-utils'
                # ``atomic()``: its random name (``secrets.token_hex``) and generator ran
                # for every receipt of a batch (its write is nested in the batch's).
                db.conn.execute("SAVEPOINT chit_nested")
                self._nested = True
            else:
                db.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _typed(exc) from exc
        return db

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool | None:
        db = self._db
        if self._nested:
            return _release(db, exc)
        if exc is not None:
            _rollback_quietly(db)
            if isinstance(exc, sqlite3.Error) and classify(exc) is not None:
                raise _typed(exc) from exc
            return False
        try:
            # Through ``db.commit``, not the connection: it is the one seam where a COMMIT
            # can fail on purpose (tests/test_engine_regressions.py injects a disk error
            # there), and a wrapper frame costs nothing next to the fsync that follows.
            db.commit()
        except BaseException as failure:
            _rollback_quietly(db)
            if isinstance(failure, sqlite3.Error) and classify(failure) is not None:
                raise _typed(failure) from failure
            raise
        return False


def _release(db: sqlite_utils.Database, exc: BaseException | None) -> bool:
    """End a nested block's savepoint: released on success, undone on an exception.

    As sqlite-utils' ``atomic()`` did: an error that destroyed the whole transaction
    (savepoints included) is not masked by a "no such savepoint" from the clean-up, and
    a raw ``sqlite3`` error from the block is re-raised typed.
    """
    conn = db.conn
    try:
        if exc is None:
            conn.execute("RELEASE chit_nested")
            return False
        if conn.in_transaction:
            conn.execute("ROLLBACK TO chit_nested")
            conn.execute("RELEASE chit_nested")
    except sqlite3.Error as failure:
        raise _typed(failure) from failure
    if isinstance(exc, sqlite3.Error) and classify(exc) is not None:
        raise _typed(exc) from exc
    return False


def immediate(db: sqlite_utils.Database) -> AbstractContextManager[sqlite_utils.Database]:
    """Run the block as one write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``.

    Takes the write lock up front (waiting up to the busy timeout), commits on success
    and rolls back on any exception. Nested use becomes a savepoint of the outer
    transaction, so repository methods compose.

    Raises:
        StoreBusy: the write lock was not obtained within the busy timeout.
        StoreIOError: the disk failed; at COMMIT the outcome is unknown.
    """
    return _Immediate(db)


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
    # try/except rather than ``translated()``: this runs for every read of the write
    # paths, and the generator context manager was a third of its Python.
    try:
        cursor = db.conn.cursor()
        # Row access by name, set per cursor so sqlite-utils' own queries are unaffected.
        cursor.row_factory = sqlite3.Row
        try:
            cursor.execute(sql, params)
            rows: list[sqlite3.Row] = cursor.fetchall()
        finally:
            cursor.close()
    except sqlite3.Error as exc:
        typed = classify(exc)
        if typed is None:
            raise
        raise typed from exc
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
