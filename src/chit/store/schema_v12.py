"""Migration 0012's statements: the listing index holds ended receipts only.

``receipts_by_state`` (state, status_at, receipt_id, server) had an entry for every
receipt, so every receipt insert wrote a page of it, and every status change two (the
entry leaves one state's range for another's). Its five ranges, one per state, also
meant five places where entries are appended in the middle of the tree, where SQLite
splits a full page by rebalancing it with its neighbours: 1.5–1.7 WAL frames per insert
of the mixed benchmark (docs/performance.md, "Write path, 2026-12-02 13:15").

A live receipt is already in ``receipts_live`` (``WHERE active = 1``), which the
listing can read: live receipts are the few the reconciler still polls, so a page of
them is a short scan of that partial index and a sort. The listing index then only needs
the ended ones — ``receipts_ended``, ordered by status time alone (one place where
entries are appended; a state or server filter is tested on the entry). A new receipt,
which is live, touches one b-tree fewer (the table, its id's index, ``receipts_live``,
the timeline); a live receipt's status change touches none of the listing's; a receipt
enters ``receipts_ended`` once, when it ends.

``active`` is in the entry although the index's ``WHERE`` fixes it: SQLite 3.40 reads
a column named in the query from the table unless the index holds it, and every
listing query says ``active = 0`` (to use the partial index at all); with it, a page
and a filter are answered from the index alone.

Released statements: never edit them (add a migration instead).
"""

from __future__ import annotations

LISTING_ENDED_ONLY = [
    "DROP INDEX receipts_by_state",
    "CREATE INDEX receipts_ended ON receipts(status_at, receipt_id, state, server, active)"
    " WHERE active = 0",
]
