"""The store's schema, as an ordered list of sqlite-utils migrations.

sqlite-utils 4.2 ships ``sqlite_utils.migrations.Migrations`` (named migrations recorded in
``_sqlite_migrations``); chit uses it rather than a home-grown table. On top of it:

* each migration also sets ``PRAGMA user_version`` to its ordinal, so "is this file from a
  newer chit?" is one header read, answered before any write;
* migrations run inside ``BEGIN IMMEDIATE`` (sqlite-utils' own per-migration ``atomic()``
  nests as a savepoint), so two processes opening a fresh home at once migrate it once.

Add migrations at the end; never edit or reorder a released one.
"""

from __future__ import annotations

import sqlite3

import sqlite_utils
from sqlite_utils.migrations import Migrations

from chit.store.db import fetch_all, fetch_one, immediate, translated
from chit.store.errors import StoreCorrupt, StoreTooNew
from chit.store.schema_v9 import REQUEST_KEY_IS_ID
from chit.store.schema_v10 import CHANGE_IS_ROWID
from chit.store.schema_v11 import REQUEST_KEY_TRIGGER_FAILS
from chit.store.schema_v12 import LISTING_ENDED_ONLY

MIGRATION_SET = "chit.store"

migrations = Migrations(MIGRATION_SET)

_INITIAL = [
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    # Columns beside `doc` are projections of the pydantic model, kept for indexes and
    # filters; `doc` (model_dump_json) is the authority. `active` is 1 while the
    # lifecycle is not terminal, so the due-scan is a short index range.
    """CREATE TABLE receipts (
        receipt_id TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        purpose TEXT,
        work_ref TEXT,
        state TEXT NOT NULL,
        active INTEGER NOT NULL,
        retrieval TEXT NOT NULL,
        acceptance TEXT NOT NULL,
        cancel_posture TEXT NOT NULL,
        accepted_at TEXT NOT NULL,
        status_at TEXT NOT NULL,
        next_check_at TEXT,
        expires_at TEXT,
        request_key TEXT NOT NULL UNIQUE,
        handle_blob BLOB,
        handle_fp TEXT,
        version INTEGER NOT NULL,
        doc TEXT NOT NULL
    )""",
    # Keyset pagination (newest status first) with and without each filter.
    "CREATE INDEX receipts_by_status ON receipts(status_at, receipt_id)",
    "CREATE INDEX receipts_by_state ON receipts(state, status_at, receipt_id)",
    "CREATE INDEX receipts_by_server ON receipts(server, status_at, receipt_id)",
    "CREATE INDEX receipts_by_work ON receipts(work_ref, status_at, receipt_id)",
    "CREATE INDEX receipts_due ON receipts(active, next_check_at)",
    # No AUTOINCREMENT: it would rewrite sqlite_sequence on every append (one more WAL
    # frame per commit); seq, not id, orders a timeline.
    """CREATE TABLE observations (
        id INTEGER PRIMARY KEY,
        receipt_id TEXT NOT NULL REFERENCES receipts(receipt_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        source TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT,
        message TEXT,
        applied INTEGER NOT NULL,
        changes TEXT NOT NULL DEFAULT '[]',
        UNIQUE (receipt_id, seq)
    )""",
    # The timeline is history: rows are appended, never edited (deleting a receipt still
    # cascades).
    """CREATE TRIGGER observations_append_only BEFORE UPDATE ON observations
       BEGIN SELECT RAISE(ABORT, 'observations are append-only'); END""",
    """CREATE TABLE intents (
        request_key TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        args_digest TEXT NOT NULL,
        purpose TEXT,
        work_ref TEXT,
        state TEXT NOT NULL,
        receipt_id TEXT REFERENCES receipts(receipt_id) ON DELETE SET NULL,
        attempts INTEGER NOT NULL,
        error TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX intents_by_state ON intents(state, created_at)",
    "CREATE INDEX intents_by_receipt ON intents(receipt_id)",
    """CREATE TABLE work_records (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        purpose TEXT,
        task_key TEXT,
        status TEXT NOT NULL,
        owner TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        completed_at TEXT,
        completion_summary TEXT,
        deleted_at TEXT
    )""",
    "CREATE INDEX work_by_task_key ON work_records(task_key)",
    "CREATE INDEX work_by_updated ON work_records(updated_at, id)",
    """CREATE TABLE work_notes (
        id INTEGER PRIMARY KEY,
        work_id TEXT NOT NULL REFERENCES work_records(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        text TEXT NOT NULL,
        UNIQUE (work_id, seq)
    )""",
]


@migrations(name="0001_initial")
def m0001_initial(db: sqlite_utils.Database) -> None:
    """Create the meta, receipts, observations, intents and work-record tables."""
    for statement in _INITIAL:
        db.execute(statement)
    db.execute("PRAGMA user_version=1")


@migrations(name="0002_lease")
def m0002_lease(db: sqlite_utils.Database) -> None:
    """Create the reconciler lease: one active reconciler per home (owner + heartbeat)."""
    db.execute(
        """CREATE TABLE lease (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            acquired_at TEXT NOT NULL,
            heartbeat_at TEXT NOT NULL
        )"""
    )
    db.execute("PRAGMA user_version=2")


@migrations(name="0003_intent_owner")
def m0003_intent_owner(db: sqlite_utils.Database) -> None:
    """Record who is sending an intent (``host|pid|token``), so nobody else resumes it."""
    db.execute("ALTER TABLE intents ADD COLUMN owner TEXT")
    db.execute("PRAGMA user_version=3")


# Fewer and narrower b-trees per receipt commit, measured page by page (WAL frames per
# commit) in docs/performance.md, "Store". With synchronous=FULL every page a commit
# dirties is written and synced before it returns, so each b-tree a receipt insert
# touches costs about one 4 KiB page.
_WRITE_PATH = [
    # The timeline clustered on (receipt_id, seq): one b-tree where a rowid table plus
    # its UNIQUE (receipt_id, seq) index made two. Rows are small and a receipt's rows
    # are read together, in seq order, which is the clustering order.
    """CREATE TABLE observations_v4 (
        receipt_id TEXT NOT NULL REFERENCES receipts(receipt_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        source TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT,
        message TEXT,
        applied INTEGER NOT NULL,
        changes TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (receipt_id, seq)
    ) WITHOUT ROWID""",
    "INSERT INTO observations_v4 (receipt_id, seq, at, source, kind, status, message,"
    " applied, changes) SELECT receipt_id, seq, at, source, kind, status, message, applied,"
    " changes FROM observations",
    "DROP TABLE observations",  # and its trigger, recreated below
    "ALTER TABLE observations_v4 RENAME TO observations",
    """CREATE TRIGGER observations_append_only BEFORE UPDATE ON observations
       BEGIN SELECT RAISE(ABORT, 'observations are append-only'); END""",
    # The unfiltered listing walks receipts_by_state once per state and merges the
    # pages (ReceiptRepository.list): the composite serves both, one b-tree fewer.
    "DROP INDEX receipts_by_status",
    # Most receipts have no work reference: index only those that do.
    "DROP INDEX receipts_by_work",
    "CREATE INDEX receipts_by_work ON receipts(work_ref, status_at, receipt_id)"
    " WHERE work_ref IS NOT NULL",
    # The reconciler asks only about live receipts, and about ended ones whose result is
    # still to be fetched: two partial indexes, so the ~all terminal receipts of a long
    # history sit in neither, and a receipt that ends leaves the live one.
    "DROP INDEX receipts_due",
    "CREATE INDEX receipts_live ON receipts(next_check_at) WHERE active = 1",
    "CREATE INDEX receipts_unretrieved ON receipts(next_check_at)"
    " WHERE active = 0 AND next_check_at IS NOT NULL",
]


@migrations(name="0004_write_path")
def m0004_write_path(db: sqlite_utils.Database) -> None:
    """Cluster the timeline and narrow the receipt indexes (fewer pages per commit)."""
    for statement in _WRITE_PATH:
        db.execute(statement)
    db.execute("PRAGMA user_version=4")


APPEND_ONLY = """CREATE TRIGGER observations_append_only
    BEFORE UPDATE OF receipt_id, seq, at, source, kind, status, message, applied, changes
    ON observations
    BEGIN SELECT RAISE(ABORT, 'observations are append-only'); END"""
"""A timeline row's facts never change; only its repeat count and last-seen time do."""


@migrations(name="0005_timeline_repeats")
def m0005_timeline_repeats(db: sqlite_utils.Database) -> None:
    """Timelines record changes, not polls: a row counts the identical polls after it.

    ``repeats`` (how many times the row was seen, 1 for every existing row) and
    ``last_at`` (when it was last seen) are the only columns an update may touch.
    """
    db.execute("ALTER TABLE observations ADD COLUMN repeats INTEGER NOT NULL DEFAULT 1")
    db.execute("ALTER TABLE observations ADD COLUMN last_at TEXT")
    db.execute("DROP TRIGGER IF EXISTS observations_append_only")
    db.execute(APPEND_ONLY)
    db.execute("PRAGMA user_version=5")


@migrations(name="0006_redaction_pending")
def m0006_redaction_pending(db: sqlite_utils.Database) -> None:
    """Mark rows written before redaction at the boundary for the one-time sweep.

    Only the vault knows the handles to look for, so the rewrite itself happens when a
    process next unlocks it (``chit.reconcile.sweep``); a new, empty store needs none.
    """
    if fetch_one(db, "SELECT 1 FROM receipts UNION ALL SELECT 1 FROM intents LIMIT 1"):
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('redaction.pending', '1')")
    db.execute("PRAGMA user_version=6")


@migrations(name="0007_change_cursor")
def m0007_change_cursor(db: sqlite_utils.Database) -> None:
    """Number every receipt write in commit order (the change cursor of event streams).

    ``change_seq`` is set to ``max(change_seq) + 1`` by every insert and update, under the
    write lock, so it grows in commit order; a client that remembers the last value it
    saw asks for the receipts changed after it (``receipts_by_change``).
    """
    db.execute("ALTER TABLE receipts ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0")
    db.execute("UPDATE receipts SET change_seq = rowid")
    db.execute("CREATE INDEX receipts_by_change ON receipts(change_seq)")
    db.execute("PRAGMA user_version=7")


# One listing index where there were two: the server filter is served by the state
# index, which carries each receipt's server (docs/performance.md, "Store"). A page
# filtered by server merges one range per state, as the unfiltered page does, and tests
# the server on the index entry itself (no table row is read for one that does not
# match). Every receipt write then touches one b-tree fewer.
_ONE_LISTING_INDEX = [
    "DROP INDEX receipts_by_server",
    "DROP INDEX receipts_by_state",
    "CREATE INDEX receipts_by_state ON receipts(state, status_at, receipt_id, server)",
]


@migrations(name="0008_one_listing_index")
def m0008_one_listing_index(db: sqlite_utils.Database) -> None:
    """Drop ``receipts_by_server``: ``receipts_by_state`` carries the server instead."""
    for statement in _ONE_LISTING_INDEX:
        db.execute(statement)
    db.execute("PRAGMA user_version=8")


@migrations(name="0009_request_key_is_id")
def m0009_request_key_is_id(db: sqlite_utils.Database) -> None:
    """Rebuild ``receipts`` without the request key's UNIQUE index (the id serves it)."""
    for statement in REQUEST_KEY_IS_ID:
        db.execute(statement)
    db.execute("PRAGMA user_version=9")


@migrations(name="0010_change_is_rowid")
def m0010_change_is_rowid(db: sqlite_utils.Database) -> None:
    """Rebuild ``receipts`` with its change number as rowid (no ``receipts_by_change``)."""
    for statement in CHANGE_IS_ROWID:
        db.execute(statement)
    db.execute("PRAGMA user_version=10")


@migrations(name="0011_request_key_trigger_fails")
def m0011_request_key_trigger_fails(db: sqlite_utils.Database) -> None:
    """Recreate the request-key trigger with ``RAISE(FAIL)``: no statement journal per insert."""
    for statement in REQUEST_KEY_TRIGGER_FAILS:
        db.execute(statement)
    db.execute("PRAGMA user_version=11")


@migrations(name="0012_listing_ended_only")
def m0012_listing_ended_only(db: sqlite_utils.Database) -> None:
    """List ended receipts from ``receipts_ended`` and live ones from ``receipts_live``."""
    for statement in LISTING_ENDED_ONLY:
        db.execute(statement)
    db.execute("PRAGMA user_version=12")


KNOWN = [m.name for m in migrations._migrations]
SCHEMA_VERSION = len(KNOWN)
"""The schema version this chit writes (= number of migrations)."""


def user_version(db: sqlite_utils.Database) -> int:
    """Return the file's ``PRAGMA user_version`` (0 for a new file)."""
    row = fetch_one(db, "PRAGMA user_version")
    return int(row[0]) if row is not None else 0


def _check_not_newer(db: sqlite_utils.Database) -> None:
    version = user_version(db)
    if version > SCHEMA_VERSION:
        raise StoreTooNew(
            f"the chit store has schema version {version}, newer than this chit "
            f"understands ({SCHEMA_VERSION}); upgrade chit to open it"
        )
    if not db[migrations.migrations_table].exists():
        return
    applied = fetch_all(
        db,
        f"SELECT name FROM {migrations.migrations_table} WHERE migration_set = ?",
        [MIGRATION_SET],
    )
    unknown = sorted({str(r["name"]) for r in applied} - set(KNOWN))
    if unknown:
        raise StoreTooNew(
            "the chit store was migrated by a newer chit (unknown migrations: "
            f"{', '.join(unknown)}); upgrade chit to open it"
        )


def current_version(db: sqlite_utils.Database) -> int | None:
    """The schema version when the file needs no migration, else None (reads only).

    Raises:
        StoreTooNew: the file was written by a newer chit.
        StoreCorrupt: the file is not a database.
    """
    try:
        with translated():
            _check_not_newer(db)
            if user_version(db) == SCHEMA_VERSION and not migrations.pending(db):
                return SCHEMA_VERSION
    except sqlite3.DatabaseError as exc:  # pragma: no cover - translated() covers it
        raise StoreCorrupt(f"the chit store is damaged: {exc}") from exc
    return None


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the schema up to ``SCHEMA_VERSION``; idempotent and cheap when current.

    Returns:
        The schema version after migrating.

    Raises:
        StoreTooNew: the file was written by a newer chit (nothing is changed).
        StoreCorrupt: the file is not a database.
    """
    try:
        with translated():
            _check_not_newer(db)
            # Fast path for every open after the first: a read, no write lock.
            if user_version(db) == SCHEMA_VERSION and not migrations.pending(db):
                return SCHEMA_VERSION
            # Foreign keys off while tables are rebuilt (SQLite's documented procedure;
            # a no-op inside a transaction, so set before it), checked before the commit.
            db.conn.execute("PRAGMA foreign_keys=OFF")
            try:
                with immediate(db):
                    _check_not_newer(db)  # re-check under the lock: another process won?
                    migrations.apply(db)
                    if fetch_one(db, "PRAGMA foreign_key_check") is not None:
                        raise StoreCorrupt("the chit store has rows pointing at missing rows")
            finally:
                db.conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:  # pragma: no cover - translated() covers it
        raise StoreCorrupt(f"the chit store is damaged: {exc}") from exc
    return user_version(db)
