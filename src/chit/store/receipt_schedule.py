"""The reconciler's and the change feed's ranges over receipts.

What is due, what is live, what changed since a cursor: each range on its partial index
(``receipts_live``, ``receipts_unretrieved``) or on the table's rowid, which is the change
number (0010), so a scan reads what it returns. A mixin of
:class:`~chit.store.receipt_repo.ReceiptRepository`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

import sqlite_utils

from chit import clock
from chit.receipts import Receipt
from chit.store.db import fetch_all, fetch_one, snapshot
from chit.store.receipt_rows import READ, parse

_NO_BOUND = 2**63 - 1  # the largest change number SQLite can hold: ``changed_since``
# Retrieval conditions asking again the same way cannot help: a person decides.
_LOST = "'vanished', 'expired', 'incompatible'"
# The reconciler's ranges. Each repeats its partial index's WHERE terms (SQLite uses a
# partial index only then); the ended-but-unretrieved arm names its index, because the
# planner would otherwise walk every ended receipt in receipts_ended.
_LIVE_NEVER = "active = 1 AND next_check_at IS NULL"
_LIVE_DUE = "active = 1 AND next_check_at <= ?1"
_UNRETRIEVED = (
    "receipts INDEXED BY receipts_unretrieved WHERE active = 0 AND next_check_at IS NOT NULL"
    " AND state IN ('completed', 'failed')"
)


class ReceiptSchedule:
    """Due, live and changed receipts (mixed into ``ReceiptRepository``)."""

    _db: sqlite_utils.Database

    def due(self, now: datetime, limit: int = 100) -> builtins.list[Receipt]:
        """Non-terminal receipts whose next check is due (or was never scheduled), soonest first."""
        rows = fetch_all(
            self._db,
            f"SELECT doc, next_check_at FROM receipts WHERE {_LIVE_NEVER}"
            f" UNION ALL SELECT doc, next_check_at FROM receipts WHERE {_LIVE_DUE}"
            " ORDER BY next_check_at LIMIT ?",
            [clock.iso(now), limit],
        )
        return parse(rows)

    def next_due_after(self, now: datetime) -> datetime | None:
        """The soonest check scheduled after ``now`` (None when nothing is scheduled later).

        What the reconciler sleeps until. Past-due receipts are left out: they are being
        checked, held after a failure, or waiting for a connection slot, and each of
        those wakes the loop on its own. One index probe per arm (``receipts_live``,
        ``receipts_unretrieved``).
        """
        keep = f" AND retrieval NOT IN ({_LOST})"
        row = fetch_one(
            self._db,
            "SELECT min(at) FROM ("
            "SELECT min(next_check_at) AS at FROM receipts WHERE active = 1"
            f" AND next_check_at > :now{keep}"
            f" UNION ALL SELECT min(next_check_at) AS at FROM {_UNRETRIEVED}"
            " AND next_check_at > :now)",
            {"now": clock.iso(now)},
        )
        at = row[0] if row is not None else None
        return clock.parse_iso(at) if at else None

    def due_ids(self, now: datetime, limit: int = 1000) -> builtins.list[str]:
        """Ids to check now, soonest first: live receipts past their next check (lost and
        incompatible ones excepted) and ended ones whose result is due to be fetched."""
        return [rid for rid, _ in self.due_checks(now, limit)]

    def due_checks(
        self, now: datetime, limit: int = 1000, *, after: str | None = None
    ) -> builtins.list[tuple[str, str | None]]:
        """(id, next check) of every receipt due now, as ``due_ids``, soonest first.

        ``after`` (a ``next_check_at`` an earlier scan handed out) skips what is due no
        later than it: a scan then reads only what became due since, not the whole
        backlog of checks still waiting for a connection slot. Receipts never scheduled
        are always included.

        One range per arm — never scheduled, due, unretrieved — on the two partial
        indexes (``receipts_live``, ``receipts_unretrieved``), so a scan reads what is
        due, not every live receipt.
        """
        since = "" if after is None else " AND next_check_at > :after"
        keep = f" AND retrieval NOT IN ({_LOST})"
        rows = fetch_all(
            self._db,
            f"SELECT receipt_id, next_check_at FROM receipts WHERE {_LIVE_NEVER}{keep}"
            " UNION ALL SELECT receipt_id, next_check_at FROM receipts WHERE active = 1"
            f" AND next_check_at <= :now{since}{keep}"
            f" UNION ALL SELECT receipt_id, next_check_at FROM {_UNRETRIEVED}"
            f" AND next_check_at <= :now{since} ORDER BY next_check_at LIMIT :limit",
            {"now": clock.iso(now), "after": after, "limit": limit},
        )
        return [(str(r[0]), r[1]) for r in rows]

    def live_ids(self) -> builtins.list[str]:
        """Every receipt that still needs the server: live (lost and incompatible ones
        excepted), or ended with its result still to fetch; soonest check first."""
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, next_check_at FROM receipts WHERE active = 1"
            f" AND retrieval NOT IN ({_LOST})"
            f" UNION ALL SELECT receipt_id, next_check_at FROM {_UNRETRIEVED}"
            " ORDER BY next_check_at",
        )
        return [str(r["receipt_id"]) for r in rows]

    def live_handles(self) -> builtins.list[tuple[str, str, bytes]]:
        """(receipt id, server, sealed handle) of every live receipt that has a handle.

        What the reconciler needs to route hints and subscribe to pushes for every live
        task when it starts, without parsing a document per receipt.
        """
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, server, handle_blob FROM receipts WHERE active = 1"
            " AND handle_blob IS NOT NULL",
        )
        return [(str(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    def non_terminal(self) -> builtins.list[Receipt]:
        """Every receipt whose lifecycle is not terminal (the restart rule resumes them)."""
        with snapshot(self._db):
            rows = fetch_all(self._db, f"{READ} WHERE active = 1 ORDER BY next_check_at")
        return parse(rows)

    def versions(self, receipt_ids: Sequence[str]) -> dict[str, int]:
        """The stored version of each of ``receipt_ids`` (absent ones left out), in one
        query per 500: what the reconciler checks its copies in hand against."""
        found: dict[str, int] = {}
        for at in range(0, len(receipt_ids), 500):
            chunk = receipt_ids[at : at + 500]
            rows = fetch_all(
                self._db,
                "SELECT receipt_id, version FROM receipts WHERE receipt_id IN"
                f" ({','.join('?' * len(chunk))})",
                chunk,
            )
            found.update((str(r[0]), int(r[1])) for r in rows)
        return found

    def change_cursor(self) -> int:
        """The newest change number (0 for an empty store): see migration 0007."""
        row = fetch_one(self._db, "SELECT max(change_seq) FROM receipts")
        return int(row[0]) if row is not None and row[0] is not None else 0

    def changed_since(
        self, cursor: int, limit: int, *, upto: int | None = None
    ) -> builtins.list[tuple[str, int]]:
        """Receipts written after change ``cursor`` (and not after ``upto``, when given):
        (id, change number), oldest first."""
        rows = fetch_all(
            self._db,
            "SELECT receipt_id, change_seq FROM receipts WHERE change_seq > ?"
            " AND change_seq <= ? ORDER BY change_seq LIMIT ?",
            [cursor, upto if upto is not None else _NO_BOUND, limit],
        )
        return [(str(r[0]), int(r[1])) for r in rows]
