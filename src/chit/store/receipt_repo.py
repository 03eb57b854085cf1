"""Receipts (table ``receipts``): written once accepted, updated with optimistic concurrency.

Data boundary: this repository never sees a plaintext task handle. It takes the sealed
blob (``bytes`` from the vault) and its short fingerprint, stores the blob in a BLOB column
and hands it back only through ``handle_blob()``; receipts read by ``get``/``list`` carry
the fingerprint (``Receipt.handle``), never the blob.

This module holds the writes and the point reads; a receipt's row and SQL are in
``receipt_rows``, the pages people list in ``receipt_pages`` and the reconciler's and
change feed's ranges in ``receipt_schedule`` (both mixed into the repository).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import sqlite_utils

from chit import clock
from chit.errors import Conflict
from chit.receipts import Intent, IntentState, LifecycleState, Observation, Receipt
from chit.store.db import fetch_all, fetch_one, immediate, write
from chit.store.errors import RecordNotFound, StaleWrite
from chit.store.intent_repo import upsert_intent
from chit.store.observation_repo import append_rows
from chit.store.receipt_pages import ReceiptPages
from chit.store.receipt_rows import (
    INSERT,
    READ,
    UPDATE,
    check_handle,
    dump_doc,
    insert_params,
    raise_duplicate,
    row_params,
)
from chit.store.receipt_schedule import ReceiptSchedule

__all__ = ["ReceiptRepository", "dump_doc"]


class ReceiptRepository(ReceiptPages, ReceiptSchedule):
    """Typed access to receipts; every write is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    # ----------------------------------------------------------------- writes
    def insert(
        self,
        receipt: Receipt,
        handle_blob: bytes | None,
        handle_fp: str | None,
        observations: Sequence[Observation] = (),
    ) -> Receipt:
        """Write a new receipt (and its first observations) in one transaction.

        Raises:
            AlreadyExists: the receipt id or its request key is already stored.
        """
        check_handle(receipt, handle_blob, handle_fp)
        try:
            own = all(o.receipt_id == receipt.receipt_id for o in observations)
            with immediate(self._db):
                self._insert_row(receipt, handle_blob, handle_fp)
                append_rows(self._db, observations, new_receipt=own)
        except sqlite3.IntegrityError as exc:
            raise_duplicate(exc, receipt)
            raise
        return receipt

    def record_acceptance(
        self,
        intent: Intent,
        receipt: Receipt,
        observation: Observation,
        handle_blob: bytes | None,
        handle_fp: str | None,
    ) -> Receipt:
        """The server accepted the call: write receipt, accepted intent and first observation.

        All three rows commit together or not at all, so a crash can never leave an
        accepted intent without its receipt, or a receipt without its timeline.

        Raises:
            AlreadyExists: a receipt for this request key or id already exists.
            ValueError: intent, receipt and observation do not belong together.
        """
        if intent.request_key != receipt.request_key:
            raise ValueError("intent and receipt have different request keys")
        if observation.receipt_id != receipt.receipt_id:
            raise ValueError("observation belongs to another receipt")
        check_handle(receipt, handle_blob, handle_fp)
        accepted = intent.model_copy(
            update={
                "state": IntentState.ACCEPTED,
                "receipt_id": receipt.receipt_id,
                "updated_at": clock.now(),
                "error": None,
            }
        )
        try:
            with immediate(self._db):
                self._insert_row(receipt, handle_blob, handle_fp)
                upsert_intent(self._db, accepted)
                append_rows(self._db, [observation], new_receipt=True)
        except sqlite3.IntegrityError as exc:
            raise_duplicate(exc, receipt)
            raise
        return receipt

    def _insert_row(self, receipt: Receipt, blob: bytes | None, fp: str | None) -> None:
        write(self._db, INSERT, insert_params(receipt, blob, fp))

    def update(
        self,
        receipt: Receipt,
        observations: Sequence[Observation] = (),
        expected_version: int | None = None,
        *,
        wipe_handle: bool = False,
    ) -> Receipt:
        """Replace a receipt if nobody changed it since ``expected_version``.

        The stored version becomes ``expected_version + 1`` (stamped into the returned
        model as well); the observations are appended in the same transaction.

        Args:
            receipt: the new receipt state.
            observations: timeline rows explaining the change.
            expected_version: the version the caller read (default ``receipt.version - 1``,
                the model's "bump on every applied change" convention).
            wipe_handle: erase the sealed handle (e.g. the task expired).

        Raises:
            StaleWrite: the stored version differs: re-read and re-apply.
            RecordNotFound: no such receipt.
            Conflict: the change would alter a terminal state or the request key.
        """
        expected = receipt.version - 1 if expected_version is None else expected_version
        stored = receipt.model_copy(update={"version": expected + 1})
        params = row_params(stored)
        params["expected"] = expected
        with immediate(self._db):
            if write(self._db, UPDATE, params).rowcount != 1:
                raise self._refused(stored, expected)
            if wipe_handle:
                write(
                    self._db,
                    "UPDATE receipts SET handle_blob = NULL, handle_fp = NULL WHERE receipt_id = ?",
                    [receipt.receipt_id],
                )
            append_rows(self._db, observations)
        return stored

    def _refused(self, stored: Receipt, expected: int) -> Exception:
        """Why the guarded UPDATE matched no row (read only when it did not)."""
        row = fetch_one(
            self._db,
            "SELECT version, state, request_key FROM receipts WHERE receipt_id = ?",
            [stored.receipt_id],
        )
        if row is None:
            return RecordNotFound(f"no receipt {stored.receipt_id}")
        if int(row["version"]) != expected:
            return StaleWrite(
                f"receipt {stored.receipt_id} changed (version {row['version']}, "
                f"expected {expected})"
            )
        old_state = LifecycleState(row["state"])
        if old_state.is_terminal and stored.state != old_state:
            return Conflict(f"receipt {stored.receipt_id} is {old_state}: terminal")
        return Conflict("a receipt's request key never changes")

    def delete(self, receipt_id: str) -> bool:
        """Delete a receipt and (cascade) its timeline; return whether it existed."""
        with immediate(self._db):
            cursor = write(self._db, "DELETE FROM receipts WHERE receipt_id = ?", [receipt_id])
            return cursor.rowcount > 0

    # ------------------------------------------------------------------ reads
    # ``get`` and ``get_by_prefix`` are ReceiptPages' (the read commands' reader shares them).
    def require(self, receipt_id: str) -> Receipt:
        """Return the receipt with this exact id.

        Raises:
            RecordNotFound: no such receipt.
        """
        found = self.get(receipt_id)
        if found is None:
            raise RecordNotFound(f"no receipt {receipt_id}")
        return found

    def by_request_key(self, request_key: str) -> Receipt | None:
        """Return the receipt created for this request key (idempotent replays), or None."""
        # A receipt's id is its request key (0009); one from before keeps a distinct key,
        # found in the partial index that holds only those.
        row = fetch_one(
            self._db,
            f"{READ} WHERE receipt_id = :k AND request_key = :k UNION ALL"
            f" {READ} WHERE request_key = :k AND request_key <> receipt_id LIMIT 1",
            {"k": request_key},
        )
        return Receipt.model_validate_json(row["doc"]) if row is not None else None

    def handle_blob(self, receipt_id: str) -> bytes | None:
        """Return the sealed handle of a receipt (``None`` if none or wiped).

        Raises:
            RecordNotFound: no such receipt.
        """
        row = fetch_one(
            self._db, "SELECT handle_blob FROM receipts WHERE receipt_id = ?", [receipt_id]
        )
        if row is None:
            raise RecordNotFound(f"no receipt {receipt_id}")
        blob = row["handle_blob"]
        return bytes(blob) if blob is not None else None

    def count(self) -> int:
        """Total number of receipts."""
        return int(fetch_all(self._db, "SELECT count(*) FROM receipts")[0][0])
