"""Unlocking the home's vault: the one data key for handles and server secrets.

The key id is recorded in the store's ``meta`` table. The first key of a home is created
while holding the store's write lock and recorded with ``set_if_absent``, so two processes
starting on a fresh home at once end up with one key id; the loser unlocks again with
the winner's id (and fails loudly with ``DataKeyMissing`` if the key stores disagree).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chit.errors import ChitError
from chit.home import Home
from chit.store import VAULT_KEY_ID, Store, immediate
from chit.store.db import fetch_one
from chit.vault import Vault, diagnose_key_store, select_key_store


def recorded_key_id(store: Store) -> bytes | None:
    """Return the key id recorded in ``store`` (None for a home that never sealed)."""
    value = store.meta.get(VAULT_KEY_ID)
    return bytes.fromhex(value) if value else None


def unlock_vault(home: Home, store: Store, environ: Mapping[str, str] | None = None) -> Vault:
    """Select the key store of ``home`` and unlock the data key, creating the first one.

    Args:
        home: the chit home (the file key store lives there).
        store: the open store whose ``meta`` table records the key id.
        environ: settings (default ``os.environ``): ``CHIT_KEY_STORE`` and friends.

    Returns:
        The unlocked vault.

    Raises:
        KeyStoreUnavailable: no trusted key store (nothing is created then).
        DataKeyMissing: a key id is recorded but its key is not in the key store.
    """
    key_store = select_key_store(home, environ)
    kid = recorded_key_id(store)
    if kid is not None:
        return Vault.unlock(key_store, kid)
    if key_store.kind == "memory":
        # A memory key dies with this process: recording its id would make every later
        # command on this home report "data key missing" over nothing worth keeping.
        return Vault.unlock(key_store, None)
    # A fresh home: create the key under the write lock so a concurrent first start
    # waits for us instead of minting a second key.
    with immediate(store.db):
        kid = recorded_key_id(store)
        vault = Vault.unlock(key_store, kid)
        if kid is None:
            store.meta.set_if_absent(VAULT_KEY_ID, vault.kid.hex())
    recorded = recorded_key_id(store)
    if recorded is not None and recorded != vault.kid:
        # Another process recorded its key first (e.g. on another connection before we
        # took the lock): the recorded id is the authority.
        return Vault.unlock(key_store, recorded)
    return vault


def sealed_state(home: Home) -> tuple[bytes | None, int]:
    """The home's recorded key id and how many sealed values it holds; reads only.

    Counts sealed task handles in the store and sealed values in ``config.toml``. What
    cannot be read counts as nothing (``chit doctor`` reports those files separately).
    """
    kid: bytes | None = None
    sealed = 0
    try:
        with Store.open_readonly(home) as store:
            kid = recorded_key_id(store)
            row = fetch_one(store.db, "SELECT count(*) FROM receipts WHERE handle_blob IS NOT NULL")
            sealed += int(row[0]) if row is not None else 0
    except ChitError:
        pass
    try:
        from chit.servers import Registry

        specs = Registry(home.config_path, _no_sealer).servers()
        sealed += sum(len(spec.secret_fields()) for spec in specs.values())
    except ChitError:
        pass
    return kid, sealed


def _no_sealer() -> Any:  # listing sealed values never opens them
    raise AssertionError("the vault is not needed to count sealed values")


def diagnose_home_key(home: Home, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``diagnose_key_store`` told what the home holds sealed (``chit doctor``, the TUI).

    A deleted data key over existing sealed values is reported as missing (not usable),
    instead of "no data key yet; it is created on first use".
    """
    kid, sealed = sealed_state(home)
    return diagnose_key_store(home, environ, expected_kid=kid, sealed=sealed)
