"""Migration 0011's statements: the request-key trigger fails without a statement journal.

0009's ``BEFORE INSERT`` trigger keeps a request key unique across old receipts (their
own key) and new ones (key = id). A trigger makes every receipt insert a "multi-write"
statement to SQLite, and one that may ``ABORT`` (the trigger's ``RAISE(ABORT)``, the
insert's own uniqueness checks) then opens a statement journal: each page the insert
dirties is first copied into it, so the statement alone could be undone. Measured on the
receipt insert (``synchronous=OFF``, the statements alone): 7–9 µs of CPU in ~120, what
dropping the trigger would save (docs/performance.md, "Store").

The statement journal is not needed. A single-row insert runs every check — NOT NULL,
UNIQUE, the trigger — before it writes a page, so a check that fails has nothing to undo;
an I/O error rolls back the whole transaction (and chit's ``immediate`` rolls back on any
error anyway). So the trigger now raises ``FAIL`` and the insert says ``INSERT OR FAIL``
(``receipt_rows.INSERT``): neither may abort a statement, and SQLite opens no journal —
as for a table without a trigger. The rule and its message are unchanged.

Released statements: never edit them (add a migration instead).
"""

from __future__ import annotations

from chit.store.schema_v9 import REQUEST_KEY_IS_ID

REQUEST_KEY_TRIGGER_FAILS = [
    "DROP TRIGGER receipts_request_key_unique",
    # 0009's trigger as it was (its WHEN clause and message), raising FAIL.
    REQUEST_KEY_IS_ID[-1].replace("RAISE(ABORT,", "RAISE(FAIL,"),
]
