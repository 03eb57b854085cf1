"""Migration 0009's statements: the request key is the receipt's id.

A new receipt takes its intent's request key as id (``chit.runtime.calls``), so the
primary key's index answers both look-ups and the request key's own UNIQUE index — one
b-tree page in every receipt insert — goes (docs/performance.md, "Store"). A UNIQUE
constraint cannot be dropped: the table is rebuilt, with foreign keys off around the
transaction (``migrations.migrate``), or dropping ``receipts`` would cascade to every
timeline row. Receipts from before keep their distinct keys in a partial unique index
(new receipts are not in it: no page is written for them); the trigger keeps a key
unique across both kinds — a new receipt's id against an older receipt's key, and back.

Released statements: never edit them (add a migration instead).
"""

from __future__ import annotations

REQUEST_KEY_IS_ID = [
    """CREATE TABLE receipts_v9 (
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
        request_key TEXT NOT NULL,
        handle_blob BLOB,
        handle_fp TEXT,
        version INTEGER NOT NULL,
        doc TEXT NOT NULL,
        change_seq INTEGER NOT NULL DEFAULT 0
    )""",
    "INSERT INTO receipts_v9 SELECT receipt_id, server, tool, purpose, work_ref, state,"
    " active, retrieval, acceptance, cancel_posture, accepted_at, status_at, next_check_at,"
    " expires_at, request_key, handle_blob, handle_fp, version, doc, change_seq FROM receipts",
    "DROP TABLE receipts",
    "ALTER TABLE receipts_v9 RENAME TO receipts",
    # The indexes of 0004, 0007 and 0008, as they were.
    "CREATE INDEX receipts_by_state ON receipts(state, status_at, receipt_id, server)",
    "CREATE INDEX receipts_by_work ON receipts(work_ref, status_at, receipt_id)"
    " WHERE work_ref IS NOT NULL",
    "CREATE INDEX receipts_live ON receipts(next_check_at) WHERE active = 1",
    "CREATE INDEX receipts_unretrieved ON receipts(next_check_at)"
    " WHERE active = 0 AND next_check_at IS NOT NULL",
    "CREATE INDEX receipts_by_change ON receipts(change_seq)",
    "CREATE UNIQUE INDEX receipts_by_request_key ON receipts(request_key)"
    " WHERE request_key <> receipt_id",
    """CREATE TRIGGER receipts_request_key_unique BEFORE INSERT ON receipts
       WHEN EXISTS (SELECT 1 FROM receipts
                    WHERE request_key = NEW.request_key AND request_key <> receipt_id)
         OR (NEW.request_key <> NEW.receipt_id AND EXISTS (SELECT 1 FROM receipts
             WHERE receipt_id = NEW.request_key AND request_key = receipt_id))
       BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: receipts.request_key'); END""",
]
