"""Schema of the task store and its migrations (``PRAGMA user_version``).

Version 1: the ``tasks`` table. Version 2 adds multi-process ownership: the
``tasks.owner_id`` column (which runtime process runs the task) and the ``owners``
table (one heartbeat row per live runtime process). Migrations run inside one
``BEGIN IMMEDIATE`` transaction, so two processes opening an old database at the
same moment cannot both try to add the column.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

SCHEMA_VERSION = 2

_TABLES = """
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
CREATE TABLE IF NOT EXISTS owners (
    owner_id        TEXT PRIMARY KEY,
    pid             INTEGER NOT NULL,
    host            TEXT NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    heartbeat_at_ms INTEGER NOT NULL
);
"""


def migrate(db: sqlite3.Connection) -> None:
    """Create or upgrade the schema to :data:`SCHEMA_VERSION` (one transaction).

    ``db`` must be in autocommit mode (``isolation_level=None``).
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        # Statement by statement: executescript() would COMMIT behind our back.
        for statement in filter(None, (s.strip() for s in _TABLES.split(";"))):
            db.execute(statement)
        # A v1 database already has ``tasks`` without the owner column.
        columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
        if "owner_id" not in columns:
            db.execute("ALTER TABLE tasks ADD COLUMN owner_id TEXT")
        db.execute("CREATE INDEX IF NOT EXISTS tasks_owner ON tasks(owner_id)")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True)
class OwnerRow:
    """One runtime process's heartbeat row (``owners``)."""

    owner_id: str
    pid: int
    host: str
    started_at_ms: int
    heartbeat_at_ms: int


@dataclass(frozen=True)
class TaskState:
    """The columns a task's owner polls to notice changes made by other processes."""

    status: str
    cancel_requested: bool
    owner_id: str | None
    responses: int
