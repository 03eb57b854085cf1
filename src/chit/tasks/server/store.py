"""Persistent task store: one SQLite file, one row per task, shared by processes.

The store is the source of truth for every task the server has accepted, so that a
task survives a server restart and a keyed retry can find its earlier outcome. It is
written so that the row exists (committed, fsynced) *before* a create reply leaves the
server: ``journal_mode=WAL`` + ``synchronous=FULL``, and every write runs in
``BEGIN IMMEDIATE`` so two writers serialise on the database lock instead of failing
half-way (``busy_timeout`` 10 s).

Several runtime processes may share one file (each stdio client spawns its own
server). Writes can therefore wait on another process's lock, or on a slow fsync
under load: the runtime runs them in a worker thread (see ``TaskRuntime.write``), never
on the event loop. Reads use a second connection with its own lock, so a read on the
event loop never queues behind a write that is waiting for the database lock (WAL
readers do not block on writers). Writes that only refresh cosmetic state (status
messages, heartbeats) skip the fsync (``durable=False``): losing one to a power cut
is harmless, and they are by far the most frequent writes.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import anyio

from chit.tasks.server.record import (
    TaskRecord,
    from_row,
    merge_answers,
    task_state,
    to_row,
    to_row_partial,
)
from chit.tasks.server.schema import OwnerRow, TaskState, migrate

__all__ = ["TaskRecord", "TaskStore"]

T = TypeVar("T")

_BUSY_RETRY_S = 30.0
"""How long a lock held by another server process is waited out beyond ``busy_timeout``."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _retry_busy(step: Callable[[], T]) -> T:
    """Run ``step``, waiting out ``database is locked`` with backoff (bounded).

    Several server processes share one task store. SQLite's busy handler covers most
    waits, but not all (a lock during WAL recovery after a peer was SIGKILLed, a
    deferred-to-write upgrade): those surface at once as ``database is locked``. They are
    transient by nature; a server must wait them out, not die of them.
    """
    deadline = time.monotonic() + _BUSY_RETRY_S
    delay = 0.01
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _create_complete(path: Path) -> None:
    """Create the store at ``path`` (0600) with its whole schema before it is visible.

    The schema is built in a private temporary file beside ``path`` and hard-linked into
    place (``os.link`` fails if ``path`` exists, so two servers starting at once never
    replace each other's file). A reader therefore never opens a half-built store.
    (``chit.store.db.create_complete`` does the same for chit's own files; ``chit.tasks``
    imports nothing of chit, so it keeps this small copy.)
    """
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        db = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            db.execute("PRAGMA synchronous = FULL")
            migrate(db)
            db.execute("PRAGMA journal_mode = WAL")
        finally:
            db.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            return  # another process created it first; theirs is complete too
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            if not path.exists():  # no hard links here: rename (tiny race, odd setups)
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, *(Path(f"{tmp}{s}") for s in ("-journal", "-wal", "-shm"))):
            with suppress(OSError):
                leftover.unlink()


def _connect(path: str) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout = 10000")
    return db


class TaskStore:
    """SQLite-backed task rows. Thread-safe: a write connection and a read connection.

    One implementation of :class:`~chit.tasks.server.backend.TaskBackend`; the other is
    :class:`~chit.tasks.server.pgstore.PostgresTaskStore` (several machines).
    """

    kind = "sqlite"
    pushes_changes = False
    """Peers' changes are seen by re-reading rows (``poll_s``), not pushed."""

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the store at ``path`` (``":memory:"`` for tests)."""
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            if not Path(self.path).exists():
                _create_complete(Path(self.path))
        self._lock = threading.RLock()
        self._db = _connect(self.path)
        _retry_busy(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
        self._db.execute("PRAGMA synchronous = FULL")
        _retry_busy(lambda: migrate(self._db))
        if self.path == ":memory:":
            # Each connection to :memory: is its own database: share the one we have.
            self._reader, self._read_lock = self._db, self._lock
        else:
            self._reader, self._read_lock = _connect(self.path), threading.RLock()

    def describe(self) -> str:
        """The database file's path."""
        return self.path

    async def follow(self, on_change: Callable[[str | None, str | None], None]) -> None:
        """SQLite has no change feed: peers' changes are found by polling; sleep."""
        await anyio.sleep_forever()

    def close(self) -> None:
        """Close the connections."""
        with self._lock, self._read_lock:
            self._db.close()
            if self._reader is not self._db:
                self._reader.close()

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """Run a write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``), rolling back on error.

        Args:
            durable: fsync the commit (``synchronous=FULL``); ``False`` for cosmetic writes
                (WAL ``synchronous=NORMAL``: survives a process crash, not a power cut).
        """
        with self._lock:
            if not durable:
                self._db.execute("PRAGMA synchronous = NORMAL")
            try:
                _retry_busy(lambda: self._db.execute("BEGIN IMMEDIATE"))
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                if not durable:
                    self._db.execute("PRAGMA synchronous = FULL")

    def _read(self, query: str, params: Any = ()) -> list[sqlite3.Row]:
        with self._read_lock:
            return _retry_busy(lambda: self._reader.execute(query, params).fetchall())

    def insert(self, record: TaskRecord) -> None:
        """Insert a new task row (durable on return)."""
        row = to_row(record)
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self.transaction() as db:
            db.execute(f"INSERT INTO tasks ({columns}) VALUES ({marks})", row)

    def insert_keyed(self, record: TaskRecord) -> TaskRecord | None:
        """Insert ``record`` unless a row with its (principal, tool, request_key) exists.

        Returns:
            The existing row when there is one (nothing inserted), else ``None``.
        """
        row = to_row(record)
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self.transaction() as db:
            found = db.execute(
                "SELECT * FROM tasks WHERE principal = ? AND tool = ? AND request_key = ?",
                (record.principal, record.tool, record.request_key),
            ).fetchone()
            if found is not None:
                return from_row(found)
            db.execute(f"INSERT INTO tasks ({columns}) VALUES ({marks})", row)
        return None

    def get(self, task_id: str) -> TaskRecord | None:
        """Return the task ``task_id`` or ``None`` (no visibility checks here)."""
        rows = self._read("SELECT * FROM tasks WHERE id = ?", (task_id,))
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
        """Set columns of one task.

        Args:
            task_id: The task.
            only_if_active: Leave terminal rows alone.
            owner: Change the row only while this owner holds it (a worker's writes:
                a task taken over by another process is no longer this worker's to write).
            durable: See :meth:`transaction`.
            **changes: ``TaskRecord`` field names and values.

        Returns:
            True when a row changed.
        """
        row = to_row_partial(changes)
        assignments = ", ".join(f"{k} = :{k}" for k in row)
        guard = " AND status IN ('working', 'input_required')" if only_if_active else ""
        if owner is not None:
            guard += " AND owner_id = :_owner"
        with self.transaction(durable=durable) as db:
            cursor = db.execute(
                f"UPDATE tasks SET {assignments} WHERE id = :_id{guard}",
                {**row, "_id": task_id, "_owner": owner},
            )
            return cursor.rowcount > 0

    def claim(self, task_id: str, expected_owner: str | None, **changes: Any) -> bool:
        """Change an active task only if its owner is still ``expected_owner`` (compare-and-set).

        Two processes settling the same orphan race here; exactly one wins.

        Returns:
            True when this call changed the row.
        """
        row = to_row_partial(changes)
        assignments = ", ".join(f"{k} = :{k}" for k in row)
        with self.transaction() as db:
            cursor = db.execute(
                f"UPDATE tasks SET {assignments} WHERE id = :_id"
                " AND status IN ('working', 'input_required') AND owner_id IS :_expected",
                {**row, "_id": task_id, "_expected": expected_owner},
            )
            return cursor.rowcount > 0

    def add_responses(
        self, task_id: str, responses: dict[str, dict[str, Any]]
    ) -> TaskRecord | None:
        """Record answers to *pending* input requests; unknown/answered keys are ignored.

        Returns:
            The updated record, or ``None`` when the task does not exist.
        """
        with self.transaction() as db:
            row = db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None:
                return None
            record = from_row(row)
            if merge_answers(record, responses):
                db.execute(
                    "UPDATE tasks SET input_responses_json = ? WHERE id = ?",
                    (json.dumps(record.input_responses), task_id),
                )
            return record

    def list_for(
        self, principal: str, now_ms: int, after: tuple[int, str] | None, limit: int
    ) -> list[TaskRecord]:
        """Return visible tasks of ``principal`` ordered by (created, id), after a cursor."""
        query = "SELECT * FROM tasks WHERE principal = ? AND expires_at_ms > ?"
        params: list[Any] = [principal, now_ms]
        if after is not None:
            query += " AND (created_at_ms > ? OR (created_at_ms = ? AND id > ?))"
            params += [after[0], after[0], after[1]]
        query += " ORDER BY created_at_ms, id LIMIT ?"
        params.append(limit)
        return [from_row(r) for r in self._read(query, params)]

    def active(self) -> list[TaskRecord]:
        """Return every non-terminal task (recovery and the orphan sweep)."""
        rows = self._read("SELECT * FROM tasks WHERE status IN ('working', 'input_required')")
        return [from_row(r) for r in rows]

    def states(self, task_ids: list[str]) -> dict[str, TaskState]:
        """Return the polled columns of ``task_ids`` (missing ids are left out)."""
        if not task_ids:
            return {}
        marks = ", ".join("?" for _ in task_ids)
        rows = self._read(
            "SELECT id, status, cancel_requested, owner_id, input_responses_json"
            f" FROM tasks WHERE id IN ({marks})",
            task_ids,
        )
        return {r["id"]: task_state(r) for r in rows}

    def purge_expired(self, now_ms: int) -> int:
        """Delete expired tasks that carry no request key (keyed ones are durable receipts).

        Returns:
            How many rows were deleted.
        """
        with self.transaction() as db:
            cursor = db.execute(
                "DELETE FROM tasks WHERE expires_at_ms <= ? AND request_key IS NULL", (now_ms,)
            )
            return cursor.rowcount

    # --- owners (one heartbeat row per live runtime process) ----------------------------

    def heartbeat(self, owner: OwnerRow) -> None:
        """Insert or refresh ``owner``'s row (re-creates it if a peer deleted it as stale)."""
        with self.transaction(durable=False) as db:
            db.execute(
                "INSERT INTO owners (owner_id, pid, host, started_at_ms, heartbeat_at_ms)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(owner_id)"
                " DO UPDATE SET heartbeat_at_ms = excluded.heartbeat_at_ms",
                (owner.owner_id, owner.pid, owner.host, owner.started_at_ms, owner.heartbeat_at_ms),
            )

    def owners(self) -> dict[str, OwnerRow]:
        """Return every owner row by id."""
        rows = self._read("SELECT * FROM owners")
        return {r["owner_id"]: OwnerRow(**dict(r)) for r in rows}

    def remove_owners(self, owner_ids: list[str]) -> None:
        """Delete owner rows that hold no active task (dead owners, after their tasks settle)."""
        with self.transaction(durable=False) as db:
            for owner_id in owner_ids:
                db.execute(
                    "DELETE FROM owners WHERE owner_id = ? AND NOT EXISTS (SELECT 1 FROM tasks"
                    " WHERE owner_id = ? AND status IN ('working', 'input_required'))",
                    (owner_id, owner_id),
                )

    def release(self, owner_id: str, failure: dict[str, Any]) -> None:
        """Let go of ``owner_id``'s tasks at a clean shutdown, then drop its row.

        Non-resumable active tasks get ``failure`` (column changes); resumable ones lose
        their owner so that a live peer, or the next process, resumes them.
        """
        row = to_row_partial(failure)
        assignments = ", ".join(f"{k} = :{k}" for k in row)
        active = "owner_id = :_owner AND status IN ('working', 'input_required')"
        with self.transaction() as db:
            db.execute(
                f"UPDATE tasks SET {assignments} WHERE {active} AND resumable = 0",
                {**row, "_owner": owner_id},
            )
            db.execute(
                f"UPDATE tasks SET owner_id = NULL WHERE {active} AND resumable = 1",
                {"_owner": owner_id},
            )
            db.execute("DELETE FROM owners WHERE owner_id = ?", (owner_id,))
