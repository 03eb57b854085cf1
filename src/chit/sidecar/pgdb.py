"""The sidecar store on PostgreSQL: schema, migrations and a connection that speaks the
sidecar's SQL.

The sidecar's queries are written once, in the SQL both databases accept, with ``?``
placeholders (``chit.sidecar.sql`` routes each call to SQLite or here). This module
translates the placeholders, returns rows that answer by name *and* by position like
``sqlite3.Row``, and gives ``immediate()`` the meaning it has on SQLite:

* **One writer at a time.** SQLite's ``BEGIN IMMEDIATE`` serialises every write
  transaction of the file, which the request-side logic relies on (openWork reads the
  task key and the idempotency key, then inserts). Here a write transaction takes a
  transaction-level advisory lock first, so replicas' write transactions serialise the
  same way; the unique indexes stay as a second line. Reads do not take it.
* **Claims do not queue behind it.** The executor's claim (``claiming()``) takes no
  advisory lock: it selects the next due intent ``FOR UPDATE SKIP LOCKED``, so executors
  on every replica claim different intents at once, and settles ``FOR UPDATE`` on the
  intent row, so a settle and a claim of the same expired lease cannot both win.

Connections come from one bounded pool per database URL per process (``pool_size``,
default 8), shared by every :class:`PgDatabase` of that URL; the schema is migrated once
per process. psycopg is optional (``chit[postgres]``) and imported only here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from chit.store.errors import StoreError, StoreTooNew
from chit.tasks.server.backend import StoreUnavailable
from chit.tasks.server.pgschema import migrate
from chit.tasks.server.pgstore import DEFAULT_POOL_SIZE, load_psycopg, redact, split_url

COMPONENT = "sidecar"
LOCK_KEY = 0x43484954_53494445
"""Advisory lock id of sidecar write transactions and migrations ("CHITSIDE")."""
WRITE_LOCK_KEY = LOCK_KEY + 1

MIGRATIONS: list[list[str]] = [
    # 1: the SQLite store's schema (``db.py``), with its indexes as PostgreSQL spells them.
    [
        """CREATE TABLE anchors (
            item_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            task_key TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('provisional', 'live', 'dead')),
            materialized INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            dead_reason TEXT
        )""",
        "CREATE INDEX anchors_by_task ON anchors(principal, task_key, state)",
        "CREATE INDEX anchors_by_state ON anchors(state, updated_at)",
        """CREATE TABLE intents (
            id TEXT PRIMARY KEY,
            item_id TEXT NOT NULL REFERENCES anchors(item_id),
            principal TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('start', 'note', 'status', 'complete', 'ask')),
            payload TEXT NOT NULL,
            idempotency_key TEXT,
            request_hash TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL
                CHECK (state IN ('pending', 'retrying', 'applied', 'failed', 'blocked')),
            failure_class TEXT
                CHECK (failure_class IN ('transient', 'permanent', 'blocked', 'applied')),
            error TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL,
            next_attempt_at TEXT NOT NULL,
            lease_owner TEXT,
            lease_until TEXT,
            applied_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (item_id, seq)
        )""",
        """CREATE UNIQUE INDEX intents_by_key ON intents(principal, idempotency_key)
            WHERE idempotency_key IS NOT NULL""",
        """CREATE INDEX intents_due ON intents(next_attempt_at, created_at)
            WHERE state IN ('pending', 'retrying')""",
        "CREATE INDEX intents_by_item ON intents(item_id, seq)",
        """CREATE TABLE principals (
            name TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            last_used_at TEXT
        )""",
        """CREATE TABLE receipt_links (
            receipt_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            item_id TEXT,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE decisions (
            id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            item_id TEXT NOT NULL,
            question TEXT NOT NULL,
            schema TEXT,
            state TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'cancelled')),
            answer TEXT,
            created_at TEXT NOT NULL,
            answered_at TEXT
        )""",
        "CREATE INDEX decisions_by_state ON decisions(state, created_at)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreUnreachable(StoreError):
    """The sidecar's PostgreSQL database cannot be reached (retrying may help)."""

    transient = True


class Row(tuple[Any, ...]):
    """A result row readable by position and by column name (like ``sqlite3.Row``)."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        """Build a row of ``values`` whose columns are indexed by ``names``."""
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        """``row[0]`` or ``row["column"]``."""
        if isinstance(key, str):
            return super().__getitem__(self._names[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        """Column names in order (so ``dict(row)`` works)."""
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


@lru_cache(maxsize=256)
def translate(sql: str) -> str:
    """The sidecar's SQLite-style SQL for psycopg: ``?`` → ``%s``, ``%`` escaped.

    The sidecar's statements carry no ``?`` or ``%`` inside string literals (values are
    always parameters), which is what makes this textual translation exact.
    """
    return sql.replace("%", "%%").replace("?", "%s")


_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def _errors_of() -> tuple[type[BaseException], ...]:
    psycopg = load_psycopg()
    from psycopg_pool import PoolTimeout

    return (psycopg.OperationalError, PoolTimeout)


POOL_WAIT_S = 15.0
"""How long a call waits for a pooled connection: request threads outnumber connections,
and write transactions queue on the writer lock holding theirs, so a burst waits."""
FAIL_FAST_S = 1.0
"""After a database was unreachable, its calls fail at once for this long (not each
after the pool's timeout)."""
_down: dict[str, tuple[float, str]] = {}


def _probe(url: str) -> str | None:
    """Why a fresh connection to ``url`` fails right now (2 s at most), or None."""
    psycopg = load_psycopg()
    try:
        psycopg.connect(split_url(url)[0], connect_timeout=2, autocommit=True).close()
    except psycopg.OperationalError as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def _unreachable(url: str, reason: str) -> StoreUnreachable:
    message = f"the sidecar store is unavailable: {reason}"
    if url:
        _down[url] = (time.monotonic() + FAIL_FAST_S, message)
    return StoreUnreachable(message)


@contextmanager
def unreachable_as_store_error(url: str = "") -> Iterator[None]:
    """Turn "cannot reach the database" into :class:`StoreUnreachable` (one line).

    While a database is known to be down, calls fail at once for :data:`FAIL_FAST_S`,
    then a quick direct probe (not the pool's long wait) decides whether to try again.
    A pool with every connection busy is told apart from an outage by the same probe.
    """
    from psycopg_pool import PoolTimeout

    errors = _errors_of()
    down = _down.get(url)
    if down is not None:
        if time.monotonic() < down[0]:
            raise StoreUnreachable(down[1])
        reason = _probe(url)
        if reason is not None:
            raise _unreachable(url, reason)
        _down.pop(url, None)
    try:
        yield
    except StoreUnavailable as exc:
        raise StoreUnreachable(f"the sidecar store is unavailable: {exc.reason}") from exc
    except PoolTimeout as exc:
        reason = _probe(url) if url else None
        if reason is not None:
            raise _unreachable(url, reason) from exc
        # Every connection busy for POOL_WAIT_S (a burst queued on the writer lock): the
        # database answers, so the next calls must not fail at once.
        raise StoreUnreachable(f"the sidecar store is busy: {exc}") from exc
    except errors as exc:
        raise _unreachable(url, " ".join(str(exc).split()) or type(exc).__name__) from exc


def _pool_for(url: str) -> Any:
    """The process's pool for ``url`` (created, and the schema migrated, on first use)."""
    with _pools_lock:
        pool = _pools.get(url)
        if pool is not None:
            return pool
        psycopg = load_psycopg()
        from psycopg_pool import ConnectionPool

        conninfo, options = split_url(url)
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": "chit-sidecar",
            "connect_timeout": 5,
        }
        with unreachable_as_store_error(), psycopg.connect(conninfo, **kwargs) as conn:
            try:
                migrate(conn, component=COMPONENT, migrations=MIGRATIONS, lock_key=LOCK_KEY)
            except RuntimeError as exc:
                raise StoreTooNew(f"{redact(url)}: {exc}") from exc
        pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=int(options.get("pool_size", DEFAULT_POOL_SIZE)),
            kwargs={**kwargs, "row_factory": _row_factory},
            timeout=POOL_WAIT_S,
            check=ConnectionPool.check_connection,
            reconnect_timeout=24 * 3600,
            open=False,
            name="chit-sidecar",
        )
        with unreachable_as_store_error():
            pool.open(wait=True, timeout=10)
        _pools[url] = pool
        return pool


def close_pools(url: str = "") -> int:
    """Close and forget this process's pools for ``url`` (every pool when empty).

    A pool lives as long as the process and keeps reconnecting to its database in the
    background; a caller that is done with a database for good (a test whose server
    is about to stop) closes it here, so nothing logs failed reconnects afterwards.
    ``url`` also matches the same URL with options (``?pool_size=...``); a URL ending
    in ``/`` (a server, no database) matches every database on that server.

    Returns:
        How many pools were closed.
    """
    with _pools_lock:
        gone = [key for key in _pools if _same_database(key, url)]
        pools = [_pools.pop(key) for key in gone]
    for key in gone:
        _down.pop(key, None)
    for pool in pools:
        pool.close(timeout=1.0)
    return len(pools)


def _same_database(key: str, url: str) -> bool:
    if not url or key == url or key.startswith(url + "?"):
        return True
    return url.endswith("/") and key.startswith(url)


class PgDatabase:
    """A sidecar database handle on PostgreSQL (see module docstring); thread-safe."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        """Open (migrating once per process) the database at ``url``.

        Raises:
            StoreUnreachable: The database cannot be reached or psycopg is missing.
            StoreTooNew: The schema was written by a newer chit.
        """
        self.url = url
        self._pool = _pool_for(url)
        self._local = threading.local()

    def describe(self) -> str:
        """The URL without its password."""
        return redact(self.url)

    def close(self) -> None:
        """Nothing to close: connections belong to the process's shared pool."""

    @property
    def in_transaction(self) -> bool:
        """True inside :meth:`transaction` on this thread."""
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def transaction(
        self, *, exclusive: bool = True, snapshot: bool = False
    ) -> Iterator[PgDatabase]:
        """One transaction on this thread (nested: a savepoint of the outer one).

        Args:
            exclusive: Take the sidecar's write lock first (the ``BEGIN IMMEDIATE``
                equivalent); ``False`` for claims, which lock rows instead.
            snapshot: A read-only transaction whose reads all see one state
                (``REPEATABLE READ``).
        """
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            with unreachable_as_store_error(self.url), conn.transaction():
                yield self
            return
        with (
            unreachable_as_store_error(self.url),
            self._pool.connection() as conn,
            conn.transaction(),
        ):
            if snapshot:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            elif exclusive:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

    def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one query; every row."""
        conn = getattr(self._local, "conn", None)
        with unreachable_as_store_error(self.url):
            if conn is not None:
                rows: list[Row] = conn.execute(translate(sql), list(params)).fetchall()
                return rows
            with self._pool.connection() as own:
                rows = own.execute(translate(sql), list(params)).fetchall()
                return rows

    def write(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one write statement inside :meth:`transaction`; the cursor (``rowcount``)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            raise StoreError("internal: write outside a transaction: " + sql.split("(")[0])
        with unreachable_as_store_error(self.url):
            return conn.execute(translate(sql), list(params))
