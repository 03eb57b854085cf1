"""Schema of the PostgreSQL task store and its migrations (an ordered list).

The row layout is the SQLite store's (``schema.py``), so :mod:`chit.tasks.server.record`
encodes rows for both. Migrations are recorded per component in ``chit_schema`` and run
in one transaction under a transaction-level advisory lock, so replicas starting at the
same moment migrate once and the others wait, then see the new version.

Every insert and every real update of a task row fires ``pg_notify('chit_tasks', …)``
from a trigger (delivered at commit), carrying the id, the status, whether the status
was kept, and the writer's ``application_name`` (its origin), so every replica hears of
every change whatever code path made it: this is what carries cancellation to the
owning replica and status changes to subscribers on other replicas.
"""

from __future__ import annotations

from typing import Any

COMPONENT = "tasks"
CHANNEL = "chit_tasks"
LOCK_KEY = 0x43484954_5441534B & 0x7FFFFFFFFFFFFFFF
"""Advisory lock id for migrations ("CHITTASK")."""

SCHEMA_TABLE = """
CREATE TABLE IF NOT EXISTS chit_schema (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
)
"""

MIGRATIONS: list[list[str]] = [
    # 1: tasks, owners, the change trigger (the SQLite store's schema version 2).
    [
        """CREATE TABLE tasks (
            id                   TEXT PRIMARY KEY,
            principal            TEXT NOT NULL,
            tool                 TEXT NOT NULL,
            args_json            TEXT NOT NULL,
            args_digest          TEXT NOT NULL,
            request_key          TEXT,
            status               TEXT NOT NULL,
            status_message       TEXT,
            created_at_ms        BIGINT NOT NULL,
            updated_at_ms        BIGINT NOT NULL,
            ttl_ms               BIGINT NOT NULL,
            expires_at_ms        BIGINT NOT NULL,
            poll_interval_ms     BIGINT NOT NULL,
            result_json          TEXT,
            error_json           TEXT,
            input_requests_json  TEXT NOT NULL DEFAULT '{}',
            input_responses_json TEXT NOT NULL DEFAULT '{}',
            cancel_requested     INTEGER NOT NULL DEFAULT 0,
            resumable            INTEGER NOT NULL DEFAULT 0,
            protocol             TEXT NOT NULL,
            progress_token_json  TEXT,
            runs                 INTEGER NOT NULL DEFAULT 0,
            owner_id             TEXT
        )""",
        """CREATE UNIQUE INDEX tasks_request_key
            ON tasks(principal, tool, request_key) WHERE request_key IS NOT NULL""",
        "CREATE INDEX tasks_active ON tasks(status) WHERE status IN ('working', 'input_required')",
        "CREATE INDEX tasks_principal ON tasks(principal, created_at_ms, id)",
        "CREATE INDEX tasks_owner ON tasks(owner_id)",
        "CREATE INDEX tasks_expiry ON tasks(expires_at_ms) WHERE request_key IS NULL",
        """CREATE TABLE owners (
            owner_id        TEXT PRIMARY KEY,
            pid             INTEGER NOT NULL,
            host            TEXT NOT NULL,
            started_at_ms   BIGINT NOT NULL,
            heartbeat_at_ms BIGINT NOT NULL
        )""",
        f"""CREATE OR REPLACE FUNCTION chit_task_changed() RETURNS trigger AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', json_build_object(
                'id', NEW.id,
                'status', NEW.status,
                'kept', TG_OP = 'UPDATE' AND OLD.status = NEW.status,
                'origin', current_setting('application_name')
            )::text);
            RETURN NULL;
        END
        $$ LANGUAGE plpgsql""",
        """CREATE TRIGGER tasks_inserted AFTER INSERT ON tasks
            FOR EACH ROW EXECUTE FUNCTION chit_task_changed()""",
        """CREATE TRIGGER tasks_updated AFTER UPDATE ON tasks
            FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
            EXECUTE FUNCTION chit_task_changed()""",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(
    conn: Any,
    *,
    component: str = COMPONENT,
    migrations: list[list[str]] | None = None,
    lock_key: int = LOCK_KEY,
) -> int:
    """Bring ``component``'s schema up to date on a psycopg connection (one transaction).

    Args:
        conn: An autocommit psycopg connection.
        component: The ``chit_schema`` row to read and advance.
        migrations: The ordered migration list (default: the task store's).
        lock_key: The advisory lock serialising concurrent migrations.

    Returns:
        The schema version found before migrating.

    Raises:
        RuntimeError: The database was migrated by a newer chit.
    """
    steps = MIGRATIONS if migrations is None else migrations
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        conn.execute(SCHEMA_TABLE)
        row = conn.execute(
            "SELECT version FROM chit_schema WHERE component = %s", (component,)
        ).fetchone()
        found = 0 if row is None else int(_first(row))
        if found > len(steps):
            raise RuntimeError(
                f"the {component} schema is version {found}, newer than this chit ({len(steps)})"
            )
        for statements in steps[found:]:
            for statement in statements:
                conn.execute(statement)
        if found < len(steps):
            conn.execute(
                "INSERT INTO chit_schema (component, version) VALUES (%s, %s)"
                " ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
                (component, len(steps)),
            )
    return found


def _first(row: Any) -> Any:
    return row["version"] if isinstance(row, dict) else row[0]
