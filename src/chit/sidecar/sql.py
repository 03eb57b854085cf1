"""The sidecar's database calls, on SQLite or PostgreSQL: one set of helpers for both.

The sidecar modules run their SQL through these functions instead of calling
``chit.store.db`` directly. On a SQLite file (``sqlite_utils.Database``) each one *is*
the ``chit.store.db`` helper of the same name — busy handling, typed errors and
``BEGIN IMMEDIATE`` unchanged. On PostgreSQL (:class:`~chit.sidecar.pgdb.PgDatabase`)
the same statements run through psycopg with the same transaction meaning (see
``pgdb``). The only dialect-specific words the callers need are the row locks
(:func:`for_update`, :func:`skip_locked`), which SQLite does not have and does not need
(its write lock already covers the whole file).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import sqlite_utils

from chit.errors import ChitError, UsageError
from chit.home import Home
from chit.store import immediate as sqlite_immediate
from chit.store.db import fetch_all as sqlite_fetch_all
from chit.store.db import quick_check as sqlite_quick_check
from chit.store.db import snapshot as sqlite_snapshot
from chit.store.db import write as sqlite_write
from chit.tasks.server.backend import is_postgres_url

if TYPE_CHECKING:
    from chit.sidecar.pgdb import PgDatabase

SidecarDb: TypeAlias = "sqlite_utils.Database | PgDatabase"
"""An open sidecar database: a SQLite file or a PostgreSQL database."""

Target: TypeAlias = "Path | str"
"""Where the sidecar store is: a SQLite file path or a ``postgresql://`` URL."""


def configured_store(home: Home, key: str) -> str | None:
    """``[store] key`` in the home's ``config.toml`` (``tasks``, ``sidecar``), if set.

    Raises:
        UsageError: The config file cannot be read, or the value is not a string.
    """
    from chit.servers.toml_io import read

    try:
        doc = read(home.config_path)
    except ChitError as exc:
        raise UsageError(str(exc)) from exc
    section = doc.get("store")
    value = section.get(key) if isinstance(section, dict) else None
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise UsageError(f"[store] {key} in {home.config_path} must be a URL or a path")
    return value


def sidecar_target(home: Home) -> Target:
    """The home's sidecar store: ``[store] sidecar`` from config, else ``sidecar.db``."""
    return configured_store(home, "sidecar") or home.sidecar_db_path


def is_postgres(db: Any) -> bool:
    """True for a PostgreSQL handle."""
    return getattr(db, "dialect", None) == "postgresql"


def open_database(target: Target) -> Any:
    """Open (creating and migrating if needed) the sidecar store at ``target``.

    Raises:
        StoreError: (a subclass) the store cannot be opened, reached or is too new.
    """
    if is_postgres_url(target):
        from chit.sidecar.pgdb import PgDatabase

        return PgDatabase(str(target))
    from chit.sidecar.db import open_sidecar_db

    return open_sidecar_db(Path(target))


def exists(target: Target) -> bool:
    """Whether the store has been created (a database server always counts as created)."""
    return is_postgres_url(target) or Path(target).exists()


def fetch_all(db: Any, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """Run one query and return every row (readable by name and position)."""
    if is_postgres(db):
        return list(db.fetch_all(sql, params))
    return sqlite_fetch_all(db, sql, params)  # already a list: no copy


def fetch_one(db: Any, sql: str, params: Sequence[Any] = ()) -> Any:
    """Run one query and return its first row, or ``None``."""
    rows = fetch_all(db, sql, params)
    return rows[0] if rows else None


class Cursor(Protocol):
    """What callers read from a write: how many rows it changed."""

    @property
    def rowcount(self) -> int:
        """Rows changed by the statement."""
        ...


def write(db: Any, sql: str, params: Sequence[Any] = ()) -> Cursor:
    """Execute one write statement inside :func:`immediate`; the cursor (``rowcount``)."""
    if is_postgres(db):
        cursor: Cursor = db.write(sql, params)
        return cursor
    return sqlite_write(db, sql, params)


@contextmanager
def snapshot(db: Any) -> Iterator[Any]:
    """Reads that see one consistent state of the store (for counters)."""
    if is_postgres(db):
        with db.transaction(exclusive=False, snapshot=True):
            yield db
        return
    with sqlite_snapshot(db):
        yield db


@contextmanager
def _pg_transaction(db: Any, *, exclusive: bool) -> Iterator[Any]:
    with db.transaction(exclusive=exclusive):
        yield db


def immediate(db: Any) -> AbstractContextManager[Any]:
    """One write transaction, writers serialised (SQLite ``BEGIN IMMEDIATE``).

    On SQLite this *is* ``chit.store.immediate`` (returned, not wrapped: a second
    generator frame around every openWork cost more CPU than its two SELECTs' Python).
    """
    if is_postgres(db):
        return _pg_transaction(db, exclusive=True)
    return sqlite_immediate(db)


def claiming(db: Any) -> AbstractContextManager[Any]:
    """A transaction for the executor's claim and settle: row locks, no writer lock.

    On SQLite it is :func:`immediate` (the file lock is the only lock there is).
    """
    if is_postgres(db):
        return _pg_transaction(db, exclusive=False)
    return sqlite_immediate(db)


def for_update(db: Any) -> str:
    """`` FOR UPDATE`` on PostgreSQL (lock the rows read), nothing on SQLite."""
    return " FOR UPDATE" if is_postgres(db) else ""


def skip_locked(db: Any, table: str) -> str:
    """`` FOR UPDATE OF table SKIP LOCKED`` on PostgreSQL, nothing on SQLite."""
    return f" FOR UPDATE OF {table} SKIP LOCKED" if is_postgres(db) else ""


def quick_check(db: Any) -> list[str]:
    """Integrity check lines (``["ok"]`` when sound; PostgreSQL: reachable)."""
    if is_postgres(db):
        db.fetch_all("SELECT 1")
        return ["ok"]
    return sqlite_quick_check(db)
