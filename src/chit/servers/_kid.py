"""Where the vault's key id is recorded: the store's ``meta`` table (``VAULT_KEY_ID``).

One data key serves the whole home (task handles in the store, server secrets in
``config.toml``), so its id is recorded once, in the store, by whoever seals first.
"""

from __future__ import annotations

from chit.home import Home


def recorded_kid(home: Home) -> bytes | None:
    """Return the recorded key id, or None for a home where nothing was sealed yet."""
    if not home.db_path.exists():
        return None  # do not create a database just to learn there is nothing in it
    from chit.store import Store
    from chit.store.meta_repo import VAULT_KEY_ID

    with Store.open(home) as store:
        value = store.meta.get(VAULT_KEY_ID)
    return bytes.fromhex(value) if value else None


def record_kid(home: Home, kid: bytes) -> None:
    """Record ``kid`` unless a key id is already recorded (first sealer wins)."""
    from chit.store import Store
    from chit.store.meta_repo import VAULT_KEY_ID

    with Store.open(home) as store:
        store.meta.set_if_absent(VAULT_KEY_ID, kid.hex())
