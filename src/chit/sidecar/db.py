"""The sidecar's own SQLite file (``home.sidecar_db_path``): schema and opening.

The sidecar owns intent lifetime; the library (``chit.db``) owns user records (seed 000).
So this is a separate file with the same settings as the library — WAL, ``synchronous=
FULL``, a 15 s busy timeout, 0600, every write in ``BEGIN IMMEDIATE`` — opened through
``chit.store.db.connect`` so there is one implementation of those rules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from chit.store import BUSY_TIMEOUT_S, StoreCorrupt, StoreTooNew, immediate
from chit.store.db import connect, fetch_all, tighten_side_files, translated, write
from chit.store.migrations import user_version

_V1 = [
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


# Version 2: fewer and narrower b-trees on the openWork commit (measured page by page in
# docs/performance.md, "Sidecar"). Anchors are clustered on their id (``WITHOUT ROWID``:
# one b-tree where a rowid table plus its primary-key index made two; a row is ~150
# bytes). Intents stay a rowid table — clustering their wider rows cost more page
# splits than the dropped index saved — but are rebuilt so the idempotency key is
# indexed only where one was given, and the executor's due queue holds only the
# intents it can claim (pending, retrying): applied ones leave it. Every query the
# sidecar runs still has an index (tests/test_query_plans.py).
_V2 = [
    """CREATE TABLE anchors_v2 (
        item_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        task_key TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('provisional', 'live', 'dead')),
        materialized INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        dead_reason TEXT
    ) WITHOUT ROWID""",
    "INSERT INTO anchors_v2 SELECT item_id, principal, task_key, state, materialized,"
    " created_at, updated_at, dead_reason FROM anchors",
    """CREATE TABLE intents_v2 (
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
    "INSERT INTO intents_v2 SELECT id, item_id, principal, kind, payload, idempotency_key,"
    " request_hash, seq, state, failure_class, error, attempts, max_attempts,"
    " next_attempt_at, lease_owner, lease_until, applied_at, created_at, updated_at"
    " FROM intents",
    "DROP TABLE intents",
    "DROP TABLE anchors",
    "ALTER TABLE anchors_v2 RENAME TO anchors",
    "ALTER TABLE intents_v2 RENAME TO intents",
    # open_work's task-key lookup (principal, task_key, live-or-provisional).
    "CREATE INDEX anchors_by_task ON anchors(principal, task_key, state)",
    # The executor's sweeps (provisional orphans, live anchors whose item went), oldest
    # update first, and the statistics' counts.
    "CREATE INDEX anchors_by_state ON anchors(state, updated_at)",
    # Replays by idempotency key; intents without one are not indexed at all.
    "CREATE UNIQUE INDEX intents_by_key ON intents(principal, idempotency_key)"
    " WHERE idempotency_key IS NOT NULL",
    # The claim query's queue: only claimable intents, in the order they are claimed.
    "CREATE INDEX intents_due ON intents(next_attempt_at, created_at)"
    " WHERE state IN ('pending', 'retrying')",
]

# Version 3: one anchor index where there were two (docs/performance.md, "Sidecar"):
# every openWork inserts an anchor, and each index is a b-tree page or more in its
# commit. The state leads, so the executor's sweeps and the statistics read one range
# per state as before; open_work's task-key lookup (state 'provisional' or 'live',
# principal, task key) is one seek per state; the sweep's "oldest update first" sorts
# the entries of one state by the update time the index carries (no row is read to
# sort).
_V3 = [
    "DROP INDEX anchors_by_task",
    "DROP INDEX anchors_by_state",
    "CREATE INDEX anchors_by_state ON anchors(state, principal, task_key, updated_at)",
]

Migration = Callable[[sqlite_utils.Database], None]


def _run(statements: list[str]) -> Migration:
    def apply(db: sqlite_utils.Database) -> None:
        for statement in statements:
            write(db, statement)

    return apply


MIGRATIONS: list[Migration] = [_run(_V1), _run(_V2), _run(_V3)]
"""Ordered schema steps; step ``n`` brings ``user_version`` from ``n`` to ``n + 1``.
Add new steps at the end; never edit one that shipped."""

SCHEMA_VERSION = len(MIGRATIONS)


def open_sidecar_db(path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite_utils.Database:
    """Open (creating and migrating if needed) the sidecar store at ``path``.

    A new file is created with its whole schema before it becomes visible at ``path``
    (``chit.store.db.create_complete``), so nobody ever reads a half-built store.

    Raises:
        StoreTooNew: the file was written by a newer chit.
        StoreError: (or a subclass) the file cannot be opened or is damaged.
    """
    db = connect(path, timeout=timeout, build=_migrate)
    try:
        version = user_version(db)
        if version > SCHEMA_VERSION:
            raise StoreTooNew(f"{path} is from a newer chit (sidecar schema {version})")
        if version < SCHEMA_VERSION:
            _migrate(db)  # re-checks the version under the write lock
    except BaseException:
        db.close()
        raise
    tighten_side_files(path)
    return db


def _migrate(db: sqlite_utils.Database) -> None:
    """Apply the missing steps in one ``BEGIN IMMEDIATE`` transaction.

    Foreign keys are off while the steps run (SQLite's documented way to rebuild a
    table that others reference: a rebuilt ``anchors`` is dropped and renamed under
    ``intents``' feet) and checked as a whole before the commit.
    """
    conn = db.conn
    conn.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set before
    try:
        with immediate(db):
            # Re-read under the write lock: another process may have just migrated.
            version = user_version(db)
            if version > SCHEMA_VERSION:
                raise StoreTooNew(f"the sidecar store is from a newer chit (schema {version})")
            for step in MIGRATIONS[version:]:
                step(db)
            broken = fetch_all(db, "PRAGMA foreign_key_check")
            if broken:
                raise StoreCorrupt(
                    f"the sidecar store has {len(broken)} rows pointing at missing anchors"
                )
            write(db, f"PRAGMA user_version={SCHEMA_VERSION}")
    finally:
        with translated():
            conn.execute("PRAGMA foreign_keys=ON")
