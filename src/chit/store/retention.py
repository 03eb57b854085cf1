"""Timeline retention: trim the timelines of settled receipts, then give the space back.

A receipt is *settled* once its task ended (a terminal lifecycle state) and its outcome
was judged - accepted or rejected, or it needed no acceptance. The timeline of a receipt
settled before a cutoff keeps its first observation (how it started) and its last (how
it ended); the rows in between are deleted. The receipt itself - the nine elements, the
outcome, the verdict - is never touched.

Deleted rows leave free pages; the file is ``auto_vacuum=INCREMENTAL`` (new stores are
created so, an older file is converted once with a ``VACUUM``), so ``reclaim`` hands them
back to the file system with ``PRAGMA incremental_vacuum`` and truncates the WAL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import sqlite_utils

from chit import clock
from chit.store.db import SIDE_FILE_SUFFIXES, fetch_all, fetch_one, immediate, translated, write

__all__ = ["PruneResult", "Reclaimed", "TimelineRetention", "file_bytes"]

BATCH = 200
"""Receipts trimmed per write transaction (keeps the write lock short for the reconciler)."""

# Settled before the cutoff: ended (and last observed) before it, and judged before it -
# or needing no judgement. SQLite's julianday() reads both ISO forms chit writes.
_SETTLED = (
    "SELECT r.receipt_id AS receipt_id, count(*) AS n FROM receipts AS r"
    " JOIN observations AS o ON o.receipt_id = r.receipt_id"
    " WHERE r.active = 0 AND r.status_at < :cutoff AND ("
    "   r.acceptance = 'not_required'"
    "   OR (r.acceptance IN ('accepted', 'rejected')"
    "       AND julianday(json_extract(r.doc, '$.acceptance.decided_at'))"
    "           < julianday(:cutoff)))"
    " GROUP BY r.receipt_id HAVING count(*) > 2"
)
_TRIM = (
    "DELETE FROM observations WHERE receipt_id = :rid"
    " AND seq > (SELECT min(seq) FROM observations WHERE receipt_id = :rid)"
    " AND seq < (SELECT max(seq) FROM observations WHERE receipt_id = :rid)"
)


@dataclass(frozen=True)
class PruneResult:
    """What a prune did (or, with ``dry_run``, would do).

    Attributes:
        cutoff: receipts settled before this were trimmed.
        receipts: how many timelines were trimmed.
        rows: how many observation rows were deleted.
        dry_run: True when nothing was changed.
    """

    cutoff: datetime
    receipts: int
    rows: int
    dry_run: bool


@dataclass(frozen=True)
class Reclaimed:
    """The database's size on disk (file plus side files) before and after reclaiming.

    Attributes:
        bytes_before: size before.
        bytes_after: size after.
        converted: True when the file was switched to ``auto_vacuum=INCREMENTAL`` (a
            one-time ``VACUUM`` of a store created before chit did that itself).
    """

    bytes_before: int
    bytes_after: int
    converted: bool


def file_bytes(path: Path) -> int:
    """The size of a database file plus its ``-wal``/``-shm``/``-journal`` files."""
    total = 0
    for suffix in ("", *SIDE_FILE_SUFFIXES):
        side = path.with_name(path.name + suffix)
        if side.exists():
            total += side.stat().st_size
    return total


def _chunks(items: list[tuple[str, int]], size: int) -> Iterator[list[tuple[str, int]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class TimelineRetention:
    """Trims settled receipts' timelines and reclaims the space (see the module doc)."""

    def __init__(self, db: sqlite_utils.Database, path: Path) -> None:
        """Work on ``db``, the store file at ``path``."""
        self._db = db
        self._path = path

    def settled(self, cutoff: datetime) -> list[tuple[str, int]]:
        """Receipts settled before ``cutoff`` with more than two rows: (id, rows)."""
        rows = fetch_all(self._db, _SETTLED, {"cutoff": clock.iso(cutoff)})
        return [(str(r["receipt_id"]), int(r["n"])) for r in rows]

    def prune(self, cutoff: datetime, *, dry_run: bool = False) -> PruneResult:
        """Keep only the first and last observation of receipts settled before ``cutoff``.

        Runs in transactions of ``BATCH`` receipts, so a reconciler sharing the file
        waits at most one batch. A receipt that changes meanwhile is still settled
        (terminal states never change), so no re-check is needed.
        """
        found = self.settled(cutoff)
        if dry_run:
            return PruneResult(cutoff, len(found), sum(n - 2 for _, n in found), True)
        deleted = 0
        for chunk in _chunks(found, BATCH):
            with immediate(self._db):
                for rid, _ in chunk:
                    deleted += write(self._db, _TRIM, {"rid": rid}).rowcount
        return PruneResult(cutoff, len(found), deleted, False)

    def auto_vacuum(self) -> int:
        """The file's ``auto_vacuum`` mode: 0 none, 1 full, 2 incremental."""
        row = fetch_one(self._db, "PRAGMA auto_vacuum")
        return int(row[0]) if row is not None else 0

    def free_pages(self) -> int:
        """Pages the file holds that no table uses (what ``reclaim`` gives back)."""
        row = fetch_one(self._db, "PRAGMA freelist_count")
        return int(row[0]) if row is not None else 0

    def reclaim(self) -> Reclaimed:
        """Give free pages back to the file system and truncate the WAL.

        A store made before chit created files ``auto_vacuum=INCREMENTAL`` is converted
        first: that needs one ``VACUUM`` (a rewrite of the whole file, once).
        """
        before = file_bytes(self._path)
        conn = self._db.conn
        converted = False
        with translated():
            if self.auto_vacuum() != 2:
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("VACUUM")
                converted = True
            else:
                # Each step of this pragma frees one page and it returns no rows, so
                # ``execute`` (one step) would free one page: a script runs it to the end.
                conn.executescript("PRAGMA incremental_vacuum;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return Reclaimed(before, file_bytes(self._path), converted)
