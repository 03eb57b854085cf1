"""Store reads for the TUI's live model: run in thread workers, return plain data.

The index is built from the receipts table's projection columns (state, retrieval,
acceptance, times), so no receipt JSON is parsed for it; full receipts are read only for
the rows on screen and the inbox. :func:`changed_since` is the cheap check that finds
what other processes wrote: one range scan of the ``status_at`` index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chit import clock
from chit.receipts import Receipt
from chit.store import Store, WorkNote, WorkRecord
from chit.store.db import fetch_all, fetch_one
from chit.tui.index import Entry, Extras, ReceiptIndex
from chit.tui.view import Question

OPEN_RECORDS = 20
"""Work records without receipts shown under the receipts (the agent opened them)."""

_ENTRY_COLUMNS = (
    "receipt_id, server, tool, purpose, work_ref, state, retrieval, acceptance,"
    " accepted_at, expires_at, version"
)


@dataclass(frozen=True)
class RecordInfo:
    """A work record with its notes (None when the record is gone)."""

    record: WorkRecord | None
    notes: tuple[WorkNote, ...] = ()


@dataclass(frozen=True)
class Marks:
    """Where the store was when it was read: what a later check compares against.

    Attributes:
        status_at: the newest ``status_at`` seen (ISO), None on an empty store.
        work: the newest work-record change (ISO), None without records.
    """

    status_at: str | None
    work: str | None


def read_index(store: Store) -> tuple[ReceiptIndex, str | None]:
    """Every receipt's index entry, and the newest ``status_at`` among them."""
    rows = fetch_all(store.db, f"SELECT {_ENTRY_COLUMNS}, status_at FROM receipts")
    newest = max((row[11] for row in rows), default=None)
    return ReceiptIndex(Entry.from_row(*row) for row in rows), newest


_TERMINAL = "('completed', 'failed', 'cancelled')"

EXTRAS_SQL = f"""
SELECT * FROM (
    SELECT receipt_id, version,
        CASE WHEN state NOT IN {_TERMINAL} AND retrieval = 'fresh'
            THEN json_extract(doc, '$.stale_after') END AS stale_after,
        CASE WHEN purpose IS NULL OR purpose = '' OR state = 'failed'
            THEN json_extract(doc, '$.status_message') END AS message,
        CASE WHEN state = 'completed'
            THEN json_extract(doc, '$.outcome.is_error') = 1
                OR json_extract(doc, '$.outcome.error_code') IS NOT NULL END AS error,
        CASE WHEN acceptance IN ('accepted', 'rejected')
            THEN json_extract(doc, '$.acceptance.decided_by') END AS decided_by
    FROM receipts
) WHERE stale_after IS NOT NULL OR message IS NOT NULL OR error OR decided_by IS NOT NULL
"""
"""The table's fields that live only in a receipt's JSON, for the receipts that have them."""


def read_extras(store: Store) -> list[Extras]:
    """What :meth:`ReceiptIndex.fill` completes the index with (one pass, in a worker).

    Read after the first paint, so the start does not wait for it: until it arrives a row
    on screen is shown from its full receipt.
    """
    return [tuple(row) for row in fetch_all(store.db, EXTRAS_SQL)]


def read_receipts(store: Store, ids: Iterable[str]) -> dict[str, Receipt]:
    """The full receipts of ``ids`` that still exist."""
    found: dict[str, Receipt] = {}
    for receipt_id in ids:
        receipt = store.receipts.get(receipt_id)
        if receipt is not None:
            found[receipt_id] = receipt
    return found


def read_records(store: Store, keys: Iterable[str]) -> dict[str, RecordInfo]:
    """The work records (with notes) of ``keys``; a missing record maps to None."""
    found: dict[str, RecordInfo] = {}
    for key in keys:
        record = store.work.get(key)
        notes = tuple(store.work.notes(key)) if record is not None else ()
        found[key] = RecordInfo(record, notes)
    return found


def read_open_records(store: Store) -> tuple[WorkRecord, ...]:
    """The most recently updated work records (for those that have no receipt yet)."""
    return tuple(store.work.list(limit=OPEN_RECORDS))


def read_marks(store: Store) -> Marks:
    """The newest ``status_at`` and work-record change (two index look-ups)."""
    work = fetch_one(store.db, "SELECT max(updated_at) FROM work_records")
    return Marks(store.receipts.newest_status_at(), work[0] if work else None)


def changed_since(store: Store, status_at: str | None, limit: int = 500) -> list[Receipt]:
    """Receipts observed at or after ``status_at`` (oldest first), at most ``limit``.

    ``>=``, not ``>``: two writes in one millisecond share a ``status_at``, and a page
    that ends between them must not lose the second (versions drop the repeats).
    """
    return store.receipts.observed_since(status_at, limit)


def questions(store: Store, decisions: Sequence[Any]) -> tuple[Question, ...]:
    """Agents' pending ``work_ask`` decisions with their work records."""
    return tuple(
        Question(
            decision_id=d.id,
            item_id=d.item_id,
            question=d.question,
            schema=d.schema,
            asked_at=clock.parse_iso(d.created_at),
            record=store.work.get(d.item_id),
        )
        for d in decisions
    )
