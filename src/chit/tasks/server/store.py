"""Persistent task store: one SQLite file, one row per task.

The store is the source of truth for every task the server has accepted, so that a
task survives a server restart and a keyed retry can find its earlier outcome. It is
written so that the row exists (committed, fsynced) *before* a create reply leaves the
server: ``journal_mode=WAL`` + ``synchronous=FULL``, and every write runs in
``BEGIN IMMEDIATE`` so two writers serialise on the database lock instead of failing
half-way (``busy_timeout`` 10 s).

Calls are synchronous and short (single-row reads and writes); the runtime calls them
from the event loop directly. That is deliberate: a task server holds one writer
process, and every call is sub-millisecond on a local disk.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id                  TEXT PRIMARY KEY,
    principal           TEXT NOT NULL,
    tool                TEXT NOT NULL,
    args_json           TEXT NOT NULL,
    args_digest         TEXT NOT NULL,
    request_key         TEXT,
    status              TEXT NOT NULL,
    status_message      TEXT,
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL,
    ttl_ms              INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    poll_interval_ms    INTEGER NOT NULL,
    result_json         TEXT,
    error_json          TEXT,
    input_requests_json TEXT NOT NULL DEFAULT '{}',
    input_responses_json TEXT NOT NULL DEFAULT '{}',
    cancel_requested    INTEGER NOT NULL DEFAULT 0,
    resumable           INTEGER NOT NULL DEFAULT 0,
    protocol            TEXT NOT NULL,
    progress_token_json TEXT,
    runs                INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS tasks_request_key
    ON tasks(principal, tool, request_key) WHERE request_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_status ON tasks(status);
CREATE INDEX IF NOT EXISTS tasks_principal ON tasks(principal, created_at_ms);
"""


@dataclass
class TaskRecord:
    """One stored task (a row of ``tasks``); JSON columns are decoded."""

    id: str
    principal: str
    tool: str
    args: dict[str, Any]
    args_digest: str
    request_key: str | None
    status: str
    status_message: str | None
    created_at_ms: int
    updated_at_ms: int
    ttl_ms: int
    expires_at_ms: int
    poll_interval_ms: int
    protocol: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancel_requested: bool = False
    resumable: bool = False
    progress_token: str | int | None = None
    runs: int = 0

    @property
    def pending_inputs(self) -> dict[str, dict[str, Any]]:
        """Input requests that have no response yet."""
        return {k: v for k, v in self.input_requests.items() if k not in self.input_responses}


_JSON_COLUMNS = {
    "args": "args_json",
    "result": "result_json",
    "error": "error_json",
    "input_requests": "input_requests_json",
    "input_responses": "input_responses_json",
    "progress_token": "progress_token_json",
}
_BOOL_COLUMNS = {"cancel_requested", "resumable"}


def _to_row(record: TaskRecord) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name in _JSON_COLUMNS:
            row[_JSON_COLUMNS[f.name]] = None if value is None else json.dumps(value)
        elif f.name in _BOOL_COLUMNS:
            row[f.name] = int(bool(value))
        else:
            row[f.name] = value
    return row


def _from_row(row: sqlite3.Row) -> TaskRecord:
    values: dict[str, Any] = {}
    for f in fields(TaskRecord):
        if f.name in _JSON_COLUMNS:
            raw = row[_JSON_COLUMNS[f.name]]
            values[f.name] = None if raw is None else json.loads(raw)
        elif f.name in _BOOL_COLUMNS:
            values[f.name] = bool(row[f.name])
        else:
            values[f.name] = row[f.name]
    values["input_requests"] = values["input_requests"] or {}
    values["input_responses"] = values["input_responses"] or {}
    return TaskRecord(**values)


class TaskStore:
    """SQLite-backed task rows. Thread-safe; one connection guarded by a lock."""

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the store at ``path`` (``":memory:"`` for tests)."""
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        # Statement by statement: executescript() would COMMIT behind our back.
        for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
            self._db.execute(statement)
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``), rolling back on error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def insert(self, record: TaskRecord) -> None:
        """Insert a new task row (durable on return)."""
        row = _to_row(record)
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self.transaction() as db:
            db.execute(f"INSERT INTO tasks ({columns}) VALUES ({marks})", row)

    def insert_keyed(self, record: TaskRecord) -> TaskRecord | None:
        """Insert ``record`` unless a row with its (principal, tool, request_key) exists.

        Returns:
            The existing row when there is one (nothing inserted), else ``None``.
        """
        row = _to_row(record)
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self.transaction() as db:
            found = db.execute(
                "SELECT * FROM tasks WHERE principal = ? AND tool = ? AND request_key = ?",
                (record.principal, record.tool, record.request_key),
            ).fetchone()
            if found is not None:
                return _from_row(found)
            db.execute(f"INSERT INTO tasks ({columns}) VALUES ({marks})", row)
        return None

    def get(self, task_id: str) -> TaskRecord | None:
        """Return the task ``task_id`` or ``None`` (no visibility checks here)."""
        with self._lock:
            row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None else _from_row(row)

    def update(self, task_id: str, *, only_if_active: bool = False, **changes: Any) -> bool:
        """Set columns of one task; with ``only_if_active`` terminal rows are left alone.

        Returns:
            True when a row changed.
        """
        row = _to_row_partial(changes)
        assignments = ", ".join(f"{k} = :{k}" for k in row)
        guard = " AND status IN ('working', 'input_required')" if only_if_active else ""
        with self.transaction() as db:
            cursor = db.execute(
                f"UPDATE tasks SET {assignments} WHERE id = :_id{guard}", {**row, "_id": task_id}
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
            record = _from_row(row)
            pending = record.pending_inputs
            accepted = {k: v for k, v in responses.items() if k in pending}
            if accepted and record.status == "input_required":
                record.input_responses.update(accepted)
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
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
        return [_from_row(r) for r in rows]

    def active(self) -> list[TaskRecord]:
        """Return every non-terminal task (used at start-up recovery)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM tasks WHERE status IN ('working', 'input_required')"
            ).fetchall()
        return [_from_row(r) for r in rows]

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


def _to_row_partial(changes: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, value in changes.items():
        if name in _JSON_COLUMNS:
            row[_JSON_COLUMNS[name]] = None if value is None else json.dumps(value)
        elif name in _BOOL_COLUMNS:
            row[name] = int(bool(value))
        else:
            row[name] = value
    return row
