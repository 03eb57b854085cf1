"""The sidecar's own SQLite file (``home.sidecar_db_path``): schema and opening.

The sidecar owns intent lifetime; the library (``chit.db``) owns user records (seed 000).
So this is a separate file with the same settings as the library — WAL, ``synchronous=
FULL``, a 15 s busy timeout, 0600, every write in ``BEGIN IMMEDIATE`` — opened through
``chit.store.db.connect`` so there is one implementation of those rules.
"""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from chit.store import BUSY_TIMEOUT_S, StoreTooNew, immediate
from chit.store.db import connect, tighten_side_files, write
from chit.store.migrations import user_version

SCHEMA_VERSION = 1

_SCHEMA = [
    # One row per issued item id. `materialized` is 1 once the library record exists.
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
    "CREATE INDEX anchors_by_state ON anchors(state)",
    # Intents are applied in `seq` order per item; the lease lets two executors (the
    # Supervisor's and a standalone one) share the queue without double application.
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
        UNIQUE (principal, idempotency_key),
        UNIQUE (item_id, seq)
    )""",
    "CREATE INDEX intents_open ON intents(state, next_attempt_at)",
    # Bearer-token principals: the token is stored as a SHA-256 hash (see principals.py).
    """CREATE TABLE principals (
        name TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        last_used_at TEXT
    )""",
    # Receipts started through task_call, bound to the principal that started them.
    """CREATE TABLE receipt_links (
        receipt_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        item_id TEXT,
        created_at TEXT NOT NULL
    )""",
    # Questions work_ask parked for a human; answered with `chit sidecar decide`.
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
]


def open_sidecar_db(path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite_utils.Database:
    """Open (creating and migrating if needed) the sidecar store at ``path``.

    Raises:
        StoreTooNew: the file was written by a newer chit.
        StoreError: (or a subclass) the file cannot be opened or is damaged.
    """
    db = connect(path, timeout=timeout)
    try:
        version = user_version(db)
        if version > SCHEMA_VERSION:
            raise StoreTooNew(f"{path} is from a newer chit (sidecar schema {version})")
        if version < SCHEMA_VERSION:
            with immediate(db):
                # Re-read under the write lock: another process may have just migrated.
                if user_version(db) == 0:
                    for statement in _SCHEMA:
                        write(db, statement)
                    write(db, f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.close()
        raise
    tighten_side_files(path)
    return db
