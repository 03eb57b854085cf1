"""Migration 0012's statements: the listing index holds ended receipts only.

``receipts_by_state`` (state, status_at, receipt_id, server) had an entry for every
receipt, so every receipt insert wrote a page of it, and every status change two (the
entry leaves one state's range for another's). Its five ranges, one per state, also
meant five places where entries are appended in the middle of the tree, where SQLite
splits a full page by rebalancing it with its neighbours: 1.5–1.7 WAL frames per insert
of the mixed benchmark (docs/performance.md, "Write path, 2026-12-02 13:15").

A live receipt is already in ``receipts_live`` (``WHERE active = 1``), which the
listing can read: live receipts are the few the reconciler still polls (hundreds, a few
thousand), so a page of them is a scan of that partial index and a sort. The listing
index then only needs the ended ones — ``receipts_ended``, ordered by status time alone
(one place where entries are appended; a state or server filter is tested on the entry).
A new receipt, which is live, touches one b-tree fewer (the table, its id's index,
``receipts_live``, the timeline); a receipt enters ``receipts_ended`` once, when it ends.

``receipts_live`` now carries what a page needs (status time, id, state, server), so
the live receipts are read from its entries alone, not from their rows: 1,000 live
receipts' newest status (the TUI's mark, read on each of its ticks) is a pass over ~25
pages instead of 1,000 row reads. Its entry changes when the next check does, which
every poll sets, so the wider entry costs no extra page on an update; on an insert it
costs ~0.2 frames (more splits), against ~1.3 for the tree it replaces.

``receipts_unretrieved`` holds only what its one query asks for: ended receipts whose
result is still to be fetched, ``completed`` or ``failed`` (a ``cancelled`` receipt
with a next check, which that query never returns, no longer writes a page to it).

``active`` is in both entries although each index's ``WHERE`` fixes it: SQLite 3.40
reads a column named in the query from the table unless the index holds it, and every
listing query says ``active = …`` (to use the partial index at all); with it, a page
and a filter are answered from the index alone.

Released statements: never edit them (add a migration instead).
"""

from __future__ import annotations

LISTING_ENDED_ONLY = [
    "DROP INDEX receipts_by_state",
    "DROP INDEX receipts_live",
    # The reconciler's ranges read next_check_at first, as before.
    "CREATE INDEX receipts_live ON receipts(next_check_at, status_at, receipt_id, state,"
    " server, active) WHERE active = 1",
    # Only the ended receipts the reconciler asks about (receipt_schedule._UNRETRIEVED):
    # a cancelled one that still has a next check is never fetched, so it is left out.
    "DROP INDEX receipts_unretrieved",
    "CREATE INDEX receipts_unretrieved ON receipts(next_check_at)"
    " WHERE active = 0 AND next_check_at IS NOT NULL AND state IN ('completed', 'failed')",
    "CREATE INDEX receipts_ended ON receipts(status_at, receipt_id, state, server, active)"
    " WHERE active = 0",
]
