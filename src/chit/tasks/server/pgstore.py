"""Task store on PostgreSQL: several replicas, on several machines, share the tasks.

The same rows and guarantees as the SQLite store (``store.py``), through psycopg 3 and a
bounded connection pool (``pool_size``, default 8, per replica). Each public method is
one transaction; a write is committed (``synchronous_commit`` on: flushed on the server)
before it returns, except cosmetic writes (status messages, heartbeats), which set
``synchronous_commit = off`` for their transaction. Conditional writes are decided by
the database: a keyed create is ``INSERT … ON CONFLICT DO NOTHING`` against the unique
(principal, tool, request_key) index, answers are merged under ``SELECT … FOR UPDATE``,
claims and owner-guarded updates are single ``UPDATE … WHERE owner_id …`` statements.

Changes made by other replicas are pushed: a trigger sends ``pg_notify`` for every
task row written (see ``pgschema``), and :meth:`PostgresTaskStore.follow` listens on a
connection of its own, reconnecting with backoff when the server goes away.

psycopg is an optional dependency (``pip install 'chit[postgres]'``); it is imported
only when a ``postgresql://`` store is opened. Driver errors that mean "the database
cannot be reached" become :class:`~chit.tasks.server.backend.StoreUnavailable` (a
one-line JSON-RPC -32603 for clients).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chit.tasks.server.backend import ChangeCallback, StoreUnavailable
from chit.tasks.server.pgschema import migrate
from chit.tasks.server.record import (
    TaskRecord,
    from_row,
    merge_answers,
    task_state,
    to_row,
    to_row_partial,
)
from chit.tasks.server.schema import OwnerRow, TaskState

logger = logging.getLogger(__name__)

INSTALL_HINT = "PostgreSQL stores need psycopg: pip install 'chit[postgres]'"
ACTIVE = "status IN ('working', 'input_required')"
DEFAULT_POOL_SIZE = 8
FAIL_FAST_S = 1.0
"""After the database could not be reached, fail calls at once for this long."""


def load_psycopg() -> Any:
    """Import psycopg and psycopg_pool, or raise :class:`StoreUnavailable` saying how to."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - checked here, used by the store
    except ImportError as exc:
        raise StoreUnavailable(INSTALL_HINT) from exc
    return psycopg


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Split chit's own options (``pool_size``) off a PostgreSQL URL.

    Returns:
        The URL psycopg should see, and chit's options.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in ("pool_size",)}
    theirs = [(k, v) for k, v in query if k not in ours]
    return urlunsplit(parts._replace(query=urlencode(theirs))), ours


def redact(url: str) -> str:
    """``url`` without its password (safe to print)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresTaskStore:
    """PostgreSQL-backed task rows for several replicas (see module docstring)."""

    kind = "postgresql"
    pushes_changes = True

    def __init__(
        self,
        url: str,
        *,
        pool_size: int | None = None,
        connect_timeout_s: float = 5.0,
        pool_timeout_s: float = 5.0,
    ) -> None:
        """Connect, migrate and open the pool.

        Args:
            url: ``postgresql://user[:password]@host[:port]/database[?pool_size=N]``.
            pool_size: Most connections this store holds (default 8, or the URL's).
            connect_timeout_s: How long a new connection may take.
            pool_timeout_s: How long an operation waits for a free (or new) connection.

        Raises:
            StoreUnavailable: The database cannot be reached, or psycopg is missing.
        """
        psycopg = load_psycopg()
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        self._psycopg = psycopg
        self._down: tuple[float, str] | None = None
        """(until when calls fail at once, why) after the database was unreachable."""
        conninfo, options = split_url(url)
        self.url = url
        self.pool_size = pool_size or int(options.get("pool_size", DEFAULT_POOL_SIZE))
        self.origin = f"chit-tasks-{secrets.token_hex(8)}"
        """This store's ``application_name``: notifications it caused carry it."""
        self._conninfo = conninfo
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": self.origin,
            "connect_timeout": max(1, round(connect_timeout_s)),
        }
        with self._errors(), psycopg.connect(conninfo, **self._connect_kwargs) as conn:
            migrate(conn)
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=self.pool_size,
            kwargs={**self._connect_kwargs, "row_factory": dict_row},
            timeout=pool_timeout_s,
            check=ConnectionPool.check_connection,
            reconnect_timeout=24 * 3600,
            open=False,
            name="chit-tasks",
        )
        with self._errors():
            self._pool.open(wait=True, timeout=connect_timeout_s + pool_timeout_s)

    # --- plumbing -----------------------------------------------------------------------

    def describe(self) -> str:
        """The URL without its password."""
        return redact(self.url)

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn "cannot reach the database" into :class:`StoreUnavailable` (one line).

        After such a failure, calls fail at once for :data:`FAIL_FAST_S` instead of each
        waiting up to the pool timeout: reads run on the event loop, and an outage must
        not freeze every request of the replica for seconds each.
        """
        from psycopg_pool import PoolTimeout

        if self._down is not None and time.monotonic() < self._down[0]:
            raise StoreUnavailable(self._down[1])
        try:
            yield
        except PoolTimeout as exc:  # every connection busy: the database itself answers
            raise StoreUnavailable(f"no free connection: {exc}") from exc
        except self._psycopg.OperationalError as exc:
            text = str(exc).strip()
            reason = text.splitlines()[0] if text else type(exc).__name__
            self._down = (time.monotonic() + FAIL_FAST_S, reason)
            raise StoreUnavailable(reason) from exc
        self._down = None

    @contextmanager
    def _tx(self, *, durable: bool = True) -> Iterator[Any]:
        with self._errors(), self._pool.connection() as conn, conn.transaction():
            if not durable:
                conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    def _read(self, query: str, params: Any = ()) -> list[dict[str, Any]]:
        with self._errors(), self._pool.connection() as conn:
            return cast(list[dict[str, Any]], conn.execute(query, params).fetchall())

    # --- tasks ----------------------------------------------------------------------------

    def insert(self, record: TaskRecord) -> None:
        """Insert a new task row (committed on return)."""
        row = to_row(record)
        with self._tx() as conn:
            conn.execute(_insert_sql(row), row)

    def insert_keyed(self, record: TaskRecord) -> TaskRecord | None:
        """Insert unless (principal, tool, request_key) exists; return the existing row.

        ``ON CONFLICT DO NOTHING`` waits for a concurrent insert of the same key to commit
        or roll back, so of two replicas creating the same key at once exactly one inserts.
        """
        row = to_row(record)
        sql = (
            _insert_sql(row) + " ON CONFLICT (principal, tool, request_key)"
            " WHERE request_key IS NOT NULL DO NOTHING RETURNING id"
        )
        with self._tx() as conn:
            if conn.execute(sql, row).fetchone() is not None:
                return None
            found = conn.execute(
                "SELECT * FROM tasks WHERE principal = %s AND tool = %s AND request_key = %s",
                (record.principal, record.tool, record.request_key),
            ).fetchone()
        if found is None:  # deleted between the two statements: cannot be (keyed rows stay)
            raise StoreUnavailable("keyed task vanished during creation; retry")
        return from_row(found)

    def get(self, task_id: str) -> TaskRecord | None:
        """The task ``task_id`` or ``None`` (no visibility checks here)."""
        rows = self._read("SELECT * FROM tasks WHERE id = %s", (task_id,))
        return from_row(rows[0]) if rows else None

    def update(
        self,
        task_id: str,
        *,
        only_if_active: bool = False,
        owner: str | None = None,
        durable: bool = True,
        **changes: Any,
    ) -> bool:
        """Set columns of one task (see ``TaskStore.update``); True when a row changed."""
        row = to_row_partial(changes)
        guard = f" AND {ACTIVE}" if only_if_active else ""
        if owner is not None:
            guard += " AND owner_id = %(_owner)s"
        with self._tx(durable=durable) as conn:
            cursor = conn.execute(
                f"UPDATE tasks SET {_assignments(row)} WHERE id = %(_id)s{guard}",
                {**row, "_id": task_id, "_owner": owner},
            )
            return bool(cursor.rowcount > 0)

    def claim(self, task_id: str, expected_owner: str | None, **changes: Any) -> bool:
        """Change an active task only if its owner is still ``expected_owner``."""
        row = to_row_partial(changes)
        with self._tx() as conn:
            cursor = conn.execute(
                f"UPDATE tasks SET {_assignments(row)} WHERE id = %(_id)s AND {ACTIVE}"
                " AND owner_id IS NOT DISTINCT FROM %(_expected)s",
                {**row, "_id": task_id, "_expected": expected_owner},
            )
            return bool(cursor.rowcount > 0)

    def add_responses(
        self, task_id: str, responses: dict[str, dict[str, Any]]
    ) -> TaskRecord | None:
        """Record answers to *pending* input requests (row locked while merging)."""
        with self._tx() as conn:
            found = conn.execute(
                "SELECT * FROM tasks WHERE id = %s FOR UPDATE", (task_id,)
            ).fetchone()
            if found is None:
                return None
            record = from_row(found)
            if merge_answers(record, responses):
                conn.execute(
                    "UPDATE tasks SET input_responses_json = %s WHERE id = %s",
                    (json.dumps(record.input_responses), task_id),
                )
            return record

    def list_for(
        self, principal: str, now_ms: int, after: tuple[int, str] | None, limit: int
    ) -> list[TaskRecord]:
        """Visible tasks of ``principal`` ordered by (created, id), after a cursor."""
        query = "SELECT * FROM tasks WHERE principal = %s AND expires_at_ms > %s"
        params: list[Any] = [principal, now_ms]
        if after is not None:
            query += " AND (created_at_ms, id) > (%s, %s)"
            params += [after[0], after[1]]
        query += " ORDER BY created_at_ms, id LIMIT %s"
        params.append(limit)
        return [from_row(r) for r in self._read(query, params)]

    def active(self) -> list[TaskRecord]:
        """Every non-terminal task."""
        return [from_row(r) for r in self._read(f"SELECT * FROM tasks WHERE {ACTIVE}")]

    def states(self, task_ids: list[str]) -> dict[str, TaskState]:
        """The polled columns of ``task_ids`` (missing ids are left out)."""
        if not task_ids:
            return {}
        rows = self._read(
            "SELECT id, status, cancel_requested, owner_id, input_responses_json"
            " FROM tasks WHERE id = ANY(%s)",
            (task_ids,),
        )
        return {r["id"]: task_state(r) for r in rows}

    def purge_expired(self, now_ms: int) -> int:
        """Delete expired tasks that carry no request key; how many."""
        with self._tx() as conn:
            cursor = conn.execute(
                "DELETE FROM tasks WHERE expires_at_ms <= %s AND request_key IS NULL", (now_ms,)
            )
            return int(cursor.rowcount)

    # --- owners -----------------------------------------------------------------------------

    def heartbeat(self, owner: OwnerRow) -> None:
        """Insert or refresh ``owner``'s row."""
        with self._tx(durable=False) as conn:
            conn.execute(
                "INSERT INTO owners (owner_id, pid, host, started_at_ms, heartbeat_at_ms)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (owner_id)"
                " DO UPDATE SET heartbeat_at_ms = EXCLUDED.heartbeat_at_ms",
                (owner.owner_id, owner.pid, owner.host, owner.started_at_ms, owner.heartbeat_at_ms),
            )

    def owners(self) -> dict[str, OwnerRow]:
        """Every owner row by id."""
        return {r["owner_id"]: OwnerRow(**r) for r in self._read("SELECT * FROM owners")}

    def remove_owners(self, owner_ids: list[str]) -> None:
        """Delete owner rows that hold no active task."""
        with self._tx(durable=False) as conn:
            conn.execute(
                "DELETE FROM owners o WHERE o.owner_id = ANY(%s) AND NOT EXISTS"
                f" (SELECT 1 FROM tasks t WHERE t.owner_id = o.owner_id AND t.{ACTIVE})",
                (owner_ids,),
            )

    def release(self, owner_id: str, failure: dict[str, Any]) -> None:
        """Fail ``owner_id``'s non-resumable tasks, hand over its resumable ones."""
        row = to_row_partial(failure)
        active = f"owner_id = %(_owner)s AND {ACTIVE}"
        with self._tx() as conn:
            conn.execute(
                f"UPDATE tasks SET {_assignments(row)} WHERE {active} AND resumable = 0",
                {**row, "_owner": owner_id},
            )
            conn.execute(
                f"UPDATE tasks SET owner_id = NULL WHERE {active} AND resumable = 1",
                {"_owner": owner_id},
            )
            conn.execute("DELETE FROM owners WHERE owner_id = %s", (owner_id,))

    # --- change feed ----------------------------------------------------------------------------

    async def follow(self, on_change: ChangeCallback) -> None:
        """``LISTEN`` for task changes made by other processes until cancelled (``pgfeed``)."""
        from chit.tasks.server.pgfeed import follow_changes

        await follow_changes(
            self._psycopg, self._conninfo, self._connect_kwargs, self.origin, on_change
        )


def _insert_sql(row: dict[str, Any]) -> str:
    columns = ", ".join(row)
    marks = ", ".join(f"%({k})s" for k in row)
    return f"INSERT INTO tasks ({columns}) VALUES ({marks})"


def _assignments(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} = %({k})s" for k in row)
