"""Rewriting stored server text: the one-time redaction sweep of rows written before it.

Redaction at the boundary (``chit.redaction``) keeps handles and sealed secrets out of
every row written since; rows written before may still hold what a server sent. Migration
0006 marks such a store (``meta['redaction.pending']``); whoever next unlocks the vault
(``chit.reconcile.sweep``) knows the handles, and rewrites each receipt's document, its
timeline messages and its intents' errors here, then clears the mark. The store itself
never sees a handle: it is handed the rewritten texts.

The rewrite runs with ``secure_delete`` on, so the old text is zeroed in the pages it
leaves, and ends with a WAL checkpoint (``TRUNCATE``): no copy of it stays in the file or
its ``-wal``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from chit.receipts import Receipt
from chit.store.db import fetch_all, fetch_one, immediate, translated, write

if TYPE_CHECKING:  # the read commands read without sqlite-utils (chit.store.reader)
    import sqlite_utils

__all__ = ["PENDING", "TextRewriter"]

PENDING = "redaction.pending"
"""The ``meta`` key that marks a store whose older rows still need the sweep."""

Rewrite = Callable[[str], str]


class TextRewriter:
    """Reads receipts page by page and writes their redacted texts back (see module)."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        """Work on ``db``."""
        self._db = db

    def pending(self) -> bool:
        """True while rows written before redaction at the boundary await the sweep."""
        return fetch_one(self._db, "SELECT 1 FROM meta WHERE key = ?", [PENDING]) is not None

    def page(self, after: str, limit: int = 200) -> list[Receipt]:
        """The next ``limit`` receipts by id after ``after`` ("" to start)."""
        rows = fetch_all(
            self._db,
            "SELECT doc FROM receipts WHERE receipt_id > ? ORDER BY receipt_id LIMIT ?",
            [after, limit],
        )
        return [Receipt.model_validate_json(r["doc"]) for r in rows]

    def texts(self, receipt_id: str) -> list[str]:
        """The receipt's timeline messages and its intents' errors."""
        rows = fetch_all(
            self._db,
            "SELECT message AS t FROM observations WHERE receipt_id = ? AND message IS NOT NULL"
            " UNION ALL SELECT error FROM intents WHERE receipt_id = ? AND error IS NOT NULL",
            [receipt_id, receipt_id],
        )
        return [str(r["t"]) for r in rows]

    def rewrite(self, fixes: Sequence[tuple[Receipt, Receipt | None, Rewrite]]) -> int:
        """Write back each ``(old, new or None, rewrite)``: one transaction; rows changed.

        ``new`` replaces the receipt's document (same version + 1; skipped if the
        receipt changed meanwhile - a live write is already redacted); ``rewrite``
        is applied to its timeline messages and its intents' errors.
        """
        # The migrations load sqlite-utils: here only, not for ``pending`` (a read command).
        from chit.store.migrations import APPEND_ONLY

        changed = 0
        with translated():
            self._db.conn.execute("PRAGMA secure_delete=ON")
        with immediate(self._db):
            # Timeline rows are append-only; the trigger is lifted for this rewrite only.
            write(self._db, "DROP TRIGGER IF EXISTS observations_append_only")
            for old, new, fn in fixes:
                rid = old.receipt_id
                if new is not None and new != old:
                    changed += write(
                        self._db,
                        "UPDATE receipts SET doc = ?, version = version + 1"
                        " WHERE receipt_id = ? AND version = ?",
                        [
                            new.model_copy(update={"version": old.version + 1}).model_dump_json(),
                            rid,
                            old.version,
                        ],
                    ).rowcount
                for row in fetch_all(
                    self._db,
                    "SELECT seq, message FROM observations WHERE receipt_id = ?"
                    " AND message IS NOT NULL",
                    [rid],
                ):
                    clean = fn(row["message"])
                    if clean != row["message"]:
                        changed += write(
                            self._db,
                            "UPDATE observations SET message = ? WHERE receipt_id = ? AND seq = ?",
                            [clean, rid, row["seq"]],
                        ).rowcount
                changed += self._intents("receipt_id = ?", [rid], fn)
            write(self._db, APPEND_ONLY)
        return changed

    def rewrite_orphan_intents(self, fn: Rewrite) -> int:
        """Rewrite the errors of intents that never got a receipt (refused, unknown)."""
        with translated():
            self._db.conn.execute("PRAGMA secure_delete=ON")
        with immediate(self._db):
            return self._intents("receipt_id IS NULL", [], fn)

    def _intents(self, where: str, params: list[str], fn: Rewrite) -> int:
        changed = 0
        for row in fetch_all(
            self._db,
            f"SELECT request_key, error FROM intents WHERE {where} AND error IS NOT NULL",
            params,
        ):
            clean = fn(row["error"])
            if clean != row["error"]:
                changed += write(
                    self._db,
                    "UPDATE intents SET error = ? WHERE request_key = ?",
                    [clean, row["request_key"]],
                ).rowcount
        return changed

    def finish(self) -> None:
        """Clear the mark and fold the WAL into the file (old text gone from both)."""
        with immediate(self._db):
            write(self._db, "DELETE FROM meta WHERE key = ?", [PENDING])
        with translated():
            self._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            self._db.conn.execute("PRAGMA secure_delete=OFF")
