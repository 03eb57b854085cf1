"""Small key/value settings of the store (table ``meta``): vault key id and the like."""

from __future__ import annotations

import sqlite_utils

from chit.store.db import fetch_all, fetch_one, immediate, write

VAULT_KEY_ID = "vault.key_id"
"""The id of the data key that sealed the handles in this file (hex)."""


class MetaRepository:
    """Get and set string values by key."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def get(self, key: str, default: str | None = None) -> str | None:
        """Return the value stored under ``key`` (``default`` when unset)."""
        row = fetch_one(self._db, "SELECT value FROM meta WHERE key = ?", [key])
        return str(row["value"]) if row is not None else default

    def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        with immediate(self._db):
            write(
                self._db,
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [key, value],
            )

    def set_if_absent(self, key: str, value: str) -> str:
        """Store ``value`` unless ``key`` is set; return the value that is now stored.

        Lets two processes agree on a first value (e.g. the vault key id) without a race.
        """
        with immediate(self._db):
            write(
                self._db,
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                [key, value],
            )
            row = fetch_one(self._db, "SELECT value FROM meta WHERE key = ?", [key])
        return str(row["value"])

    def delete(self, key: str) -> bool:
        """Remove ``key``; return whether it was set."""
        with immediate(self._db):
            return write(self._db, "DELETE FROM meta WHERE key = ?", [key]).rowcount > 0

    def all(self) -> dict[str, str]:
        """Return every key and value."""
        rows = fetch_all(self._db, "SELECT key, value FROM meta ORDER BY key")
        return {str(r["key"]): str(r["value"]) for r in rows}
