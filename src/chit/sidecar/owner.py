"""The account guard: who owns the records the executor writes, once that is known.

Seed 000: "the helper can start before the app restores its login session". In chit the
vault stands in for the account: the owner is resolved only when the data key can be
unlocked. Until then the resolver answers None with the reason, and owner-dependent
intents stay transient (retrying) instead of failing — the login timing must never
change data durability.
"""

from __future__ import annotations

import threading
from typing import Protocol

from chit.errors import ChitError
from chit.home import Home
from chit.vault import KeyStore, Vault, select_key_store

OWNER_LABEL = "chit.sidecar.owner/1"


class OwnerResolver(Protocol):
    """Resolves the account that owns library records (None while it is unknown)."""

    def resolve(self) -> str | None:
        """Return the owner, or None while the account is not restored (never raises)."""

    @property
    def why_unresolved(self) -> str:
        """Why the last :meth:`resolve` returned None (for the intent's error)."""


def owner_of(vault: Vault) -> str:
    """The owner id of a data key: a keyed fingerprint, stable for the key, not secret."""
    return "acct-" + vault.fingerprint(OWNER_LABEL)


class VaultOwnerResolver:
    """Owner = fingerprint of the home's data key; unresolved while the key is unavailable.

    Args:
        home: The chit home (key store selection and the recorded key id).
        key_store: A key store to use instead of the environment's choice (tests).
    """

    def __init__(self, home: Home, key_store: KeyStore | None = None) -> None:
        self._home = home
        self._key_store = key_store
        self._owner: str | None = None
        self._why = "the vault has not been unlocked yet"
        self._lock = threading.Lock()

    @property
    def why_unresolved(self) -> str:
        """The reason the owner is still unknown."""
        return self._why

    def resolve(self) -> str | None:
        """Unlock the vault once; cache the owner when it works."""
        with self._lock:
            if self._owner is not None:
                return self._owner
            try:
                from chit.store import Store
                from chit.store.meta_repo import VAULT_KEY_ID

                store = self._key_store or select_key_store(self._home)
                with Store.open(self._home) as library:
                    recorded = library.meta.get(VAULT_KEY_ID)
                    vault = Vault.unlock(store, bytes.fromhex(recorded) if recorded else None)
                    if recorded is None:
                        # First unlock of this home: record the key id the way every
                        # other sealer does, so the next unlock is checked against it.
                        library.meta.set_if_absent(VAULT_KEY_ID, vault.kid.hex())
            except ChitError as exc:  # KeyStoreUnavailable, DataKeyMissing, store errors
                self._why = f"the vault is locked: {exc.message}"
                return None
            except Exception as exc:  # a keyring backend can raise anything; stay transient
                self._why = f"the vault is locked: {type(exc).__name__}: {exc}"
                return None
            self._owner = owner_of(vault)
            return self._owner


class StaticOwnerResolver:
    """An owner set by hand (tests, and hosts that resolve the account themselves)."""

    def __init__(self, owner: str | None = None, why: str = "the account is not restored") -> None:
        self.owner = owner
        self._why = why

    @property
    def why_unresolved(self) -> str:
        """The reason given when the owner is None."""
        return self._why

    def resolve(self) -> str | None:
        """Return the owner set by hand."""
        return self.owner
