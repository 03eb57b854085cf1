"""Where the vault's key id is recorded: the store's ``meta`` table, key ``vault_kid``.

One data key serves the whole home (task handles in the store, server secrets in
``config.toml``), so its id is recorded once, in the store, by whoever seals first.
"""

from __future__ import annotations

from chit.home import Home

META_KEY = "vault_kid"


def recorded_kid(home: Home) -> bytes | None:
    """Return the recorded key id, or None for a home where nothing was sealed yet."""
    if not home.db_path.exists():
        return None
    from chit.store.db import connect, fetch_one
    from chit.store.migrations import migrate

    db = connect(home.db_path)
    try:
        migrate(db)
        row = fetch_one(db, "SELECT value FROM meta WHERE key = ?", (META_KEY,))
    finally:
        db.close()
    return bytes.fromhex(str(row[0])) if row is not None else None


def record_kid(home: Home, kid: bytes) -> None:
    """Record ``kid`` unless a key id is already recorded (first sealer wins)."""
    from chit.store.db import connect, immediate, write
    from chit.store.migrations import migrate

    db = connect(home.db_path)
    try:
        migrate(db)
        with immediate(db):
            write(
                db,
                "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                (META_KEY, kid.hex()),
            )
    finally:
        db.close()
