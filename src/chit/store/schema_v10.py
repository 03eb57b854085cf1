"""Migration 0010's statements: the change number is the receipts' rowid.

Every receipt write takes the next change number (0007), and the change feed reads them
in order. Kept in a column of its own, the number needed its own index
(``receipts_by_change``): one more b-tree page in every receipt insert and two in every
update. As the table's ``INTEGER PRIMARY KEY`` it is the rowid, so the table itself is
that index (docs/performance.md, "Store"): an insert appends at its end as before, and an
update, which takes a new number, moves the row there — the table's leaf page where the
row was and the one at the end, in place of the index's two. The id stays the key every
other table points at (``UNIQUE``; its index is the one the old primary key had).

As in 0009 the table is rebuilt with foreign keys off around the migration transaction
(``migrations.migrate``), or dropping ``receipts`` would cascade to every timeline row and
clear every intent's link. Rows are copied in change order, so the new table is packed.

Released statements: never edit them (add a migration instead).
"""

from __future__ import annotations

from chit.store.schema_v9 import REQUEST_KEY_IS_ID

CHANGE_IS_ROWID = [
    """CREATE TABLE receipts_v10 (
        receipt_id TEXT NOT NULL UNIQUE,
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
        request_key TEXT NOT NULL,
        handle_blob BLOB,
        handle_fp TEXT,
        version INTEGER NOT NULL,
        doc TEXT NOT NULL,
        change_seq INTEGER PRIMARY KEY
    )""",
    # Change numbers are unique already (each is max + 1 under the write lock, 0007 gave
    # the older rows their rowid), so they are copied as they are: a client's cursor
    # stays valid across the upgrade.
    "INSERT INTO receipts_v10 SELECT receipt_id, server, tool, purpose, work_ref, state,"
    " active, retrieval, acceptance, cancel_posture, accepted_at, status_at, next_check_at,"
    " expires_at, request_key, handle_blob, handle_fp, version, doc, change_seq FROM receipts"
    " ORDER BY change_seq",
    "DROP TABLE receipts",  # its indexes and trigger go with it; recreated below
    "ALTER TABLE receipts_v10 RENAME TO receipts",
    # The indexes and trigger of 0009, as they were, but receipts_by_change.
    *(s for s in REQUEST_KEY_IS_ID[4:] if "receipts_by_change" not in s),
]
