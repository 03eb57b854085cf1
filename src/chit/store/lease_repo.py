"""The reconciler lease (table ``lease``): one active reconciler per home.

A row names the owner (a random id per process), its host and pid, and a heartbeat the
owner refreshes. Another process that finds a *live* row attaches as a viewer; a row
whose heartbeat is older than the staleness window may be taken over. Every change is
one ``BEGIN IMMEDIATE`` transaction, so two processes can never both believe they won.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlite_utils

from chit import clock
from chit.store.db import fetch_one, immediate, write

RECONCILER = "reconciler"
"""The name of the one lease chit uses today."""


@dataclass(frozen=True)
class LeaseRow:
    """The lease as stored."""

    name: str
    owner: str
    host: str
    pid: int
    acquired_at: datetime
    heartbeat_at: datetime

    def is_stale(self, now: datetime, stale_after_s: float) -> bool:
        """True when the owner has not refreshed the heartbeat within ``stale_after_s``."""
        return now - self.heartbeat_at > timedelta(seconds=stale_after_s)


def _row(row: object) -> LeaseRow | None:
    if row is None:
        return None
    r = row  # sqlite3.Row
    return LeaseRow(
        name=str(r["name"]),  # type: ignore[index]
        owner=str(r["owner"]),  # type: ignore[index]
        host=str(r["host"]),  # type: ignore[index]
        pid=int(r["pid"]),  # type: ignore[index]
        acquired_at=clock.parse_iso(str(r["acquired_at"])),  # type: ignore[index]
        heartbeat_at=clock.parse_iso(str(r["heartbeat_at"])),  # type: ignore[index]
    )


class LeaseRepository:
    """Acquire, refresh, read and release named leases."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def current(self, name: str = RECONCILER) -> LeaseRow | None:
        """Return the stored lease (live or stale), or None."""
        return _row(fetch_one(self._db, "SELECT * FROM lease WHERE name = ?", [name]))

    def acquire(
        self,
        owner: str,
        *,
        host: str,
        pid: int,
        now: datetime,
        stale_after_s: float,
        name: str = RECONCILER,
        holder_gone: Callable[[LeaseRow], bool] | None = None,
    ) -> tuple[bool, LeaseRow]:
        """Take the lease if it is free, stale, already ours, or its holder is gone.

        ``holder_gone`` is asked inside the transaction, so two processes that both see
        a dead holder cannot both win: the second finds the first's live row.

        Returns:
            ``(won, row)`` — ``row`` is the lease as stored afterwards (the live
            holder's row when ``won`` is False).
        """
        with immediate(self._db):
            held = _row(fetch_one(self._db, "SELECT * FROM lease WHERE name = ?", [name]))
            if (
                held is not None
                and held.owner != owner
                and not held.is_stale(now, stale_after_s)
                and not (holder_gone is not None and holder_gone(held))
            ):
                return False, held
            stamp = clock.iso(now)
            acquired = stamp if held is None or held.owner != owner else clock.iso(held.acquired_at)
            write(
                self._db,
                "INSERT INTO lease (name, owner, host, pid, acquired_at, heartbeat_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET owner = excluded.owner,"
                " host = excluded.host, pid = excluded.pid, acquired_at = excluded.acquired_at,"
                " heartbeat_at = excluded.heartbeat_at",
                [name, owner, host, pid, acquired, stamp],
            )
            row = _row(fetch_one(self._db, "SELECT * FROM lease WHERE name = ?", [name]))
        assert row is not None
        return True, row

    def heartbeat(self, owner: str, now: datetime, name: str = RECONCILER) -> bool:
        """Refresh the heartbeat; False when the lease is no longer ours (taken over)."""
        with immediate(self._db):
            cursor = write(
                self._db,
                "UPDATE lease SET heartbeat_at = ? WHERE name = ? AND owner = ?",
                [clock.iso(now), name, owner],
            )
            return cursor.rowcount > 0

    def release(self, owner: str, name: str = RECONCILER) -> bool:
        """Give the lease up (only if ours); return whether a row was removed."""
        with immediate(self._db):
            cursor = write(
                self._db, "DELETE FROM lease WHERE name = ? AND owner = ?", [name, owner]
            )
            return cursor.rowcount > 0
