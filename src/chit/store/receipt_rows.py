"""How a receipt is a row of ``receipts``: its columns, its stored document, its SQL.

Shared by the repository's writes and point reads (``receipt_repo``), its pages
(``receipt_pages``) and its schedule ranges (``receipt_schedule``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from chit import clock
from chit.receipts import Receipt
from chit.store.errors import AlreadyExists

_COLUMNS = (
    "receipt_id, server, tool, purpose, work_ref, state, active, retrieval, acceptance,"
    " cancel_posture, accepted_at, status_at, next_check_at, expires_at, request_key,"
    " handle_blob, handle_fp, version, doc"
)
# Every write takes the next change number (see migration 0007): one seek for the max,
# under the write lock, so numbers grow in commit order. The number is the table's rowid
# (0010): an update that takes one moves its row to the end of the table.
_NEXT_CHANGE = "(SELECT coalesce(max(change_seq), 0) + 1 FROM receipts)"
# Positional parameters, in ``insert_params``' order: binding twenty names costs more than
# building the tuple. ``OR FAIL``: every check runs before the row is written, so a failed
# one has nothing to undo, and with the trigger's ``RAISE(FAIL)`` (0011) SQLite keeps no
# statement journal for the insert (``schema_v11``).
INSERT = (
    f"INSERT OR FAIL INTO receipts ({_COLUMNS}, change_seq) VALUES"
    f" (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_NEXT_CHANGE})"
)
UPDATE = (
    "UPDATE receipts SET server = :server, tool = :tool, purpose = :purpose,"
    " work_ref = :work_ref, state = :state, active = :active, retrieval = :retrieval,"
    " acceptance = :acceptance, cancel_posture = :cancel_posture, status_at = :status_at,"
    " next_check_at = :next_check_at, expires_at = :expires_at,"
    f" version = :version, doc = :doc, change_seq = {_NEXT_CHANGE}"
    " WHERE receipt_id = :receipt_id AND version = :expected"
    # The invariants ride in the WHERE clause (no read before every write): a terminal
    # state never changes, nor does the request key. A miss is explained by
    # ``ReceiptRepository._refused``.
    " AND (active = 1 OR state = :state) AND request_key = :request_key"
)
# A check that saw nothing new (``chit.reconcile.fold.FRESHNESS``: the observation time,
# the next check, the stale deadline) moves two columns, the version and the document;
# every other column is the row's own at the expected version, so the UPDATE's invariants
# hold by the version alone. Positional parameters, ``freshen_params``' order: this runs
# on most checks.
FRESHEN = (
    "UPDATE receipts SET status_at = ?, next_check_at = ?, version = ?, doc = ?,"
    f" change_seq = {_NEXT_CHANGE} WHERE receipt_id = ? AND version = ?"
)
# Everything but the sealed blob: list/get never load ciphertext they do not need.
READ = "SELECT doc FROM receipts"


def _iso(value: datetime | None) -> str | None:
    return clock.iso(value) if value is not None else None


def dump_doc(receipt: Receipt) -> str:
    """The stored document of a receipt: its JSON without the fields at their default.

    A left-out field reads back as its default, so nothing is lost while the defaults
    stay what they are — ``tests/test_write_path.py`` pins them: changing one needs a
    migration that writes the old value into the documents that left it out. A fresh
    receipt's row shrinks from 1.1 KB to 0.5 KB: twice as many rows per page, half the
    new pages per insert (docs/performance.md, "Store").
    """
    # The model's serializer called directly: ``model_dump_json`` only forwards to it
    # (with a dozen keyword defaults), once per receipt write.
    return _SERIALIZE(receipt, exclude_defaults=True).decode()


_SERIALIZE = Receipt.__pydantic_serializer__.to_json


def row_params(receipt: Receipt) -> dict[str, Any]:
    # StrEnum members bind as their text; skipping ``.value`` is measurable per write.
    return {
        "receipt_id": receipt.receipt_id,
        "server": receipt.server,
        "tool": receipt.tool,
        "purpose": receipt.purpose,
        "work_ref": receipt.work_ref,
        "state": receipt.state,
        "active": 0 if receipt.is_terminal else 1,
        "retrieval": receipt.retrieval,
        "acceptance": receipt.acceptance.state,
        "cancel_posture": receipt.cancel.posture,
        "accepted_at": clock.iso(receipt.accepted_at),
        "status_at": clock.iso(receipt.status_at),
        "next_check_at": _iso(receipt.next_check_at),
        "expires_at": _iso(receipt.expires_at),
        "request_key": receipt.request_key,
        "handle_fp": receipt.handle.fingerprint if receipt.handle is not None else None,
        "version": receipt.version,
        "doc": dump_doc(receipt),
    }


def freshen_params(receipt: Receipt, expected: int) -> tuple[object, ...]:
    """``FRESHEN``'s parameters: ``receipt`` (at ``expected + 1``) over version ``expected``."""
    next_check = receipt.next_check_at
    return (
        clock.iso(receipt.status_at),
        clock.iso(next_check) if next_check is not None else None,
        receipt.version,
        _SERIALIZE(receipt, exclude_defaults=True).decode(),
        receipt.receipt_id,
        expected,
    )


def insert_params(receipt: Receipt, blob: bytes | None, fp: str | None) -> tuple[object, ...]:
    """A new receipt's row, in ``INSERT``'s column order."""
    next_check = receipt.next_check_at
    expires = receipt.expires_at
    return (
        receipt.receipt_id,
        receipt.server,
        receipt.tool,
        receipt.purpose,
        receipt.work_ref,
        receipt.state,
        0 if receipt.is_terminal else 1,
        receipt.retrieval,
        receipt.acceptance.state,
        receipt.cancel.posture,
        clock.iso(receipt.accepted_at),
        clock.iso(receipt.status_at),
        clock.iso(next_check) if next_check is not None else None,
        clock.iso(expires) if expires is not None else None,
        receipt.request_key,
        bytes(blob) if blob is not None else None,
        fp,
        receipt.version,
        _SERIALIZE(receipt, exclude_defaults=True).decode(),
    )


def check_handle(receipt: Receipt, handle_blob: bytes | None, handle_fp: str | None) -> None:
    # A str here would be a plaintext handle on its way into the file: refuse it loudly.
    if handle_blob is not None and not isinstance(handle_blob, bytes | bytearray):
        raise TypeError("handle_blob must be the sealed ciphertext (bytes), not plaintext")
    if (handle_blob is None) != (handle_fp is None):
        raise ValueError("handle_blob and handle_fp go together")
    if (
        receipt.handle is not None
        and handle_fp is not None
        and (receipt.handle.fingerprint != handle_fp)
    ):
        raise ValueError("handle_fp does not match receipt.handle.fingerprint")


def parse(rows: Iterable[sqlite3.Row]) -> list[Receipt]:
    return [Receipt.model_validate_json(row["doc"]) for row in rows]


def raise_duplicate(exc: sqlite3.IntegrityError, receipt: Receipt) -> None:
    text = str(exc)
    if "UNIQUE" in text and "request_key" in text:
        raise AlreadyExists(
            f"a receipt for request key {receipt.request_key} already exists"
        ) from exc
    if "UNIQUE" in text or "PRIMARY KEY" in text:
        raise AlreadyExists(f"receipt {receipt.receipt_id} already exists") from exc
