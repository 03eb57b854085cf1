"""Work records and their notes: the library the sidecar's executor writes through.

The executor applies sidecar intents through these same methods the TUI uses (seed 000:
"the executor calls the same item repository operations used by the app"), so a status
change is one transaction that replaces the single current status — there is one
``status`` column, so "exactly one current status" holds by construction.

Deletion: ``delete(id)`` is soft by default (``deleted_at`` set, notes kept) so the
sidecar can tell "the user deleted this item" (``Presence.DELETED``) from "it was never
created" (``Presence.ABSENT``); ``delete(id, hard=True)`` removes the row and its notes.
"""

from __future__ import annotations

import builtins
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import sqlite_utils

from chit import clock
from chit.store.db import fetch_all, fetch_one, immediate, write
from chit.store.errors import AlreadyExists, RecordNotFound

OPEN = "open"
COMPLETED = "completed"


class Presence(StrEnum):
    """Whether a work record can be written to."""

    LIVE = "live"
    DELETED = "deleted"  # soft-deleted by the user: the sidecar marks its anchor dead
    ABSENT = "absent"  # never created (or hard-deleted)


@dataclass(frozen=True)
class WorkRecord:
    """One work record (a card in the library)."""

    id: str
    title: str
    status: str
    created_at: datetime
    updated_at: datetime
    purpose: str | None = None
    task_key: str | None = None
    owner: str | None = None
    completed_at: datetime | None = None
    completion_summary: str | None = None
    deleted_at: datetime | None = None

    @property
    def is_deleted(self) -> bool:
        """True once the record was soft-deleted."""
        return self.deleted_at is not None


@dataclass(frozen=True)
class WorkNote:
    """One note on a work record; ``seq`` orders notes per record."""

    work_id: str
    seq: int
    at: datetime
    text: str


def _dt(value: str | None) -> datetime | None:
    return clock.parse_iso(value) if value is not None else None


def _row_to_record(row: sqlite3.Row) -> WorkRecord:
    return WorkRecord(
        id=row["id"],
        title=row["title"],
        status=row["status"],
        created_at=clock.parse_iso(row["created_at"]),
        updated_at=clock.parse_iso(row["updated_at"]),
        purpose=row["purpose"],
        task_key=row["task_key"],
        owner=row["owner"],
        completed_at=_dt(row["completed_at"]),
        completion_summary=row["completion_summary"],
        deleted_at=_dt(row["deleted_at"]),
    )


class WorkRepository:
    """Create, read, annotate, re-status, complete and delete work records."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def _live_row(self, work_id: str) -> sqlite3.Row:
        # Called inside the write transaction: the check and the write see one state.
        row = fetch_one(self._db, "SELECT * FROM work_records WHERE id = ?", [work_id])
        if row is None or row["deleted_at"] is not None:
            raise RecordNotFound(f"no work record {work_id}")
        return row  # type: ignore[no-any-return]

    def create(
        self,
        work_id: str,
        title: str,
        *,
        purpose: str | None = None,
        task_key: str | None = None,
        owner: str | None = None,
        status: str = OPEN,
    ) -> WorkRecord:
        """Create a record with an id issued beforehand (the sidecar's item id).

        Raises:
            AlreadyExists: a record with this id exists (also a soft-deleted one: ids are
                never reused).
        """
        now = clock.iso()
        with immediate(self._db):
            if fetch_one(self._db, "SELECT 1 FROM work_records WHERE id = ?", [work_id]):
                raise AlreadyExists(f"work record {work_id} already exists")
            write(
                self._db,
                "INSERT INTO work_records (id, title, purpose, task_key, status, owner,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [work_id, title, purpose, task_key, status, owner, now, now],
            )
            row = self._live_row(work_id)
        return _row_to_record(row)

    def get(self, work_id: str, *, include_deleted: bool = False) -> WorkRecord | None:
        """Return a record (soft-deleted ones only with ``include_deleted``)."""
        row = fetch_one(self._db, "SELECT * FROM work_records WHERE id = ?", [work_id])
        if row is None or (row["deleted_at"] is not None and not include_deleted):
            return None
        return _row_to_record(row)

    def exists(self, work_id: str) -> bool:
        """True if the record exists and is not deleted."""
        return self.presence(work_id) is Presence.LIVE

    def presence(self, work_id: str) -> Presence:
        """Tell live, (soft-)deleted and never-created records apart."""
        row = fetch_one(self._db, "SELECT deleted_at FROM work_records WHERE id = ?", [work_id])
        if row is None:
            return Presence.ABSENT
        return Presence.DELETED if row["deleted_at"] is not None else Presence.LIVE

    def find_by_task_key(self, task_key: str) -> list[WorkRecord]:
        """Live records created for a task key, newest first."""
        rows = fetch_all(
            self._db,
            "SELECT * FROM work_records WHERE task_key = ? AND deleted_at IS NULL"
            " ORDER BY created_at DESC",
            [task_key],
        )
        return [_row_to_record(r) for r in rows]

    def list(
        self,
        *,
        status: str | None = None,
        owner: str | None = None,
        include_deleted: bool = False,
        limit: int = 200,
    ) -> list[WorkRecord]:
        """Return records, most recently updated first."""
        where = [] if include_deleted else ["deleted_at IS NULL"]
        params: builtins.list[object] = []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        sql = "SELECT * FROM work_records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        params.append(limit)
        return [_row_to_record(r) for r in fetch_all(self._db, sql, params)]

    def add_note(self, work_id: str, text: str) -> WorkNote:
        """Append a note; notes keep the order in which they were committed.

        Raises:
            RecordNotFound: the record does not exist or was deleted.
        """
        now = clock.iso()
        with immediate(self._db):
            self._live_row(work_id)
            row = fetch_one(
                self._db,
                "SELECT coalesce(max(seq), 0) + 1 FROM work_notes WHERE work_id = ?",
                [work_id],
            )
            seq = int(row[0])
            write(
                self._db,
                "INSERT INTO work_notes (work_id, seq, at, text) VALUES (?, ?, ?, ?)",
                [work_id, seq, now, text],
            )
            write(self._db, "UPDATE work_records SET updated_at = ? WHERE id = ?", [now, work_id])
        return WorkNote(work_id=work_id, seq=seq, at=clock.parse_iso(now), text=text)

    def notes(self, work_id: str) -> builtins.list[WorkNote]:
        """Return a record's notes in order."""
        rows = fetch_all(
            self._db, "SELECT * FROM work_notes WHERE work_id = ? ORDER BY seq", [work_id]
        )
        return [
            WorkNote(
                work_id=r["work_id"], seq=int(r["seq"]), at=clock.parse_iso(r["at"]), text=r["text"]
            )
            for r in rows
        ]

    def set_status(self, work_id: str, status: str) -> WorkRecord:
        """Replace the record's one current status with ``status``.

        Raises:
            RecordNotFound: the record does not exist or was deleted.
            ValueError: ``status`` is empty.
        """
        if not status.strip():
            raise ValueError("a status cannot be empty")
        return self._update(work_id, "status = ?", [status])

    def complete(self, work_id: str, summary: str | None = None) -> WorkRecord:
        """Mark the record completed with an optional summary (repeating it is harmless)."""
        return self._update(
            work_id,
            "status = ?, completed_at = coalesce(completed_at, ?), completion_summary = ?",
            [COMPLETED, clock.iso(), summary],
        )

    def set_owner(self, work_id: str, owner: str | None) -> WorkRecord:
        """Record the account that owns the record (resolved once the vault is unlocked)."""
        return self._update(work_id, "owner = ?", [owner])

    def _update(self, work_id: str, assignments: str, params: builtins.list[object]) -> WorkRecord:
        with immediate(self._db):
            self._live_row(work_id)
            write(
                self._db,
                f"UPDATE work_records SET {assignments}, updated_at = ? WHERE id = ?",
                [*params, clock.iso(), work_id],
            )
            row = self._live_row(work_id)
        return _row_to_record(row)

    def delete(self, work_id: str, *, hard: bool = False) -> bool:
        """Delete a record: soft (keeps a tombstone) or hard (row and notes removed).

        Returns:
            True if a live record (or, for ``hard``, any row) was deleted.
        """
        with immediate(self._db):
            if hard:
                cursor = write(self._db, "DELETE FROM work_records WHERE id = ?", [work_id])
            else:
                now = clock.iso()
                cursor = write(
                    self._db,
                    "UPDATE work_records SET deleted_at = ?, updated_at = ?"
                    " WHERE id = ? AND deleted_at IS NULL",
                    [now, now, work_id],
                )
            return cursor.rowcount > 0
