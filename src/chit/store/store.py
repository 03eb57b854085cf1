"""The ``Store`` facade: one connection, its repositories, and the per-thread accessor.

Threading: a ``Store`` (its sqlite3 connection) belongs to the thread that opened it —
using it from another thread raises ``sqlite3.ProgrammingError``. Opening is cheap (a
connect, four pragmas and one header read once the schema is current, well under a
millisecond), so a Textual ``@work(thread=True)`` worker may simply ``Store.open`` its own;
long-lived thread pools use ``ThreadLocalStore``, which opens one per thread lazily.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from types import TracebackType

import sqlite_utils

from chit.home import Home
from chit.store.db import (
    BUSY_TIMEOUT_S,
    check_file,
    connect,
    quick_check,
    tighten_side_files,
    translated,
)
from chit.store.errors import StoreError
from chit.store.intent_repo import IntentRepository
from chit.store.meta_repo import MetaRepository
from chit.store.migrations import current_version, migrate
from chit.store.observation_repo import ObservationRepository
from chit.store.readonly import connect_readonly
from chit.store.receipt_repo import ReceiptRepository
from chit.store.retention import TimelineRetention
from chit.store.rewrite import TextRewriter
from chit.store.schema_check import is_current, schema_version
from chit.store.work_repo import WorkRepository


class Store:
    """An open chit store: repositories over one SQLite connection."""

    def __init__(self, db: sqlite_utils.Database, path: Path, schema_version: int) -> None:
        """Wrap an already configured and migrated connection (use ``Store.open``)."""
        self.db = db
        self.path = path
        self.schema_version = schema_version
        self.receipts = ReceiptRepository(db)
        self.observations = ObservationRepository(db)
        self.intents = IntentRepository(db)
        self.work = WorkRepository(db)
        self.meta = MetaRepository(db)
        self.retention = TimelineRetention(db, path)
        self.rewriter = TextRewriter(db)

    @classmethod
    def open(cls, home: Home, *, timeout: float = BUSY_TIMEOUT_S) -> Store:
        """Open (creating and migrating if needed) the store of ``home``.

        Raises:
            StoreTooNew: the file comes from a newer chit.
            StoreCorrupt: the file is not a sound chit database.
            StoreBusy: another process held the write lock during a needed migration.
        """
        home.ensure()
        return cls.open_path(home.db_path, timeout=timeout)

    @classmethod
    def open_path(
        cls, path: Path, *, timeout: float = BUSY_TIMEOUT_S, check_same_thread: bool = True
    ) -> Store:
        """Open the store at an explicit file path (tests, tools)."""
        # A missing file is created with the whole schema before it becomes visible.
        db = connect(path, timeout=timeout, check_same_thread=check_same_thread, build=migrate)
        try:
            version = migrate(db)
        except BaseException:
            db.close()
            raise
        tighten_side_files(path)
        return cls(db, path, version)

    @classmethod
    def open_readonly(cls, home: Home, *, timeout: float = BUSY_TIMEOUT_S) -> Store:
        """Open the store of ``home`` to read only; create, migrate or change nothing.

        A home without a store reads as an empty one (an in-memory store), so listing a
        fresh home creates no file. A store from an older chit is migrated first — the
        one write a read may need — and, if it cannot be written, refused in one line.

        Raises:
            UnsafeHome: the home exists and is not private.
            StoreTooNew: the file comes from a newer chit.
            StoreError: (or a subclass) the file cannot be read.
        """
        home.check()
        path = home.db_path
        if not path.exists() and not path.is_symlink():
            check_file(path)
            return cls.empty()
        db = connect_readonly(path, timeout=timeout)
        try:
            # The read commands' check first (StoreReader's); the migrations decide the rest.
            version = schema_version() if is_current(db.conn) else current_version(db)
        except BaseException:
            db.close()
            raise
        if version is not None:
            return cls(db, path, version)
        db.close()
        try:
            return cls.open(home, timeout=timeout)
        except StoreError as exc:
            raise StoreError(
                f"the store {path} is from an older chit and must be upgraded, but it cannot "
                f"be written ({exc.message})"
            ) from exc

    @classmethod
    def empty(cls) -> Store:
        """A migrated, empty in-memory store (what a home without a store reads as)."""
        db = sqlite_utils.Database(sqlite3.connect(":memory:"), execute_plugins=False)
        return cls(db, Path(":memory:"), migrate(db))

    def quick_check(self) -> list[str]:
        """Run ``PRAGMA quick_check``; ``["ok"]`` means the file is sound."""
        return quick_check(self.db)

    def checkpoint(self) -> None:
        """Fold the WAL back into the main file and truncate it (idle moments only)."""
        with translated():
            self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ThreadLocalStore:
    """Hands each thread its own ``Store`` on one home, opened on first use.

    Its connections are opened with ``check_same_thread=False`` only so that
    ``close_all()`` can close them from the shutting-down thread; each is still used by
    exactly one thread. Call ``close_all()`` after the workers have stopped.
    """

    def __init__(self, home: Home, *, timeout: float = BUSY_TIMEOUT_S) -> None:
        """Remember where to open; nothing is opened yet."""
        self._home = home
        self._timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[Store] = []

    def get(self) -> Store:
        """Return this thread's store, opening it if needed."""
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            self._home.ensure()
            store = Store.open_path(
                self._home.db_path, timeout=self._timeout, check_same_thread=False
            )
            self._local.store = store
            with self._lock:
                self._opened.append(store)
        return store

    def close_all(self) -> None:
        """Close every store this accessor opened."""
        with self._lock:
            opened, self._opened = self._opened, []
        for store in opened:
            try:
                store.close()
            except Exception:  # a connection of a dead thread: nothing left to save
                continue
        self._local = threading.local()
