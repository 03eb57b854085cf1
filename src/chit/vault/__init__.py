"""chit.vault: task handles sealed with a data key that lives in a trusted key store.

A random 256-bit data key sits in the OS keyring (or, by explicit opt-in, a 0600 key
file; or process memory for tests and the demo). Handles are stored as AES-256-GCM
ciphertexts bound to their row by associated data; only keyed fingerprints of handles
ever reach logs or exports. See docs/reliability.md, "Key store and sealed handles".

Typical use::

    store = select_key_store(home)              # KeyStoreUnavailable with the fix
    vault = Vault.unlock(store, recorded_kid)   # DataKeyMissing if the key is gone
    blob = vault.seal(task_id, aad_for(receipt_id, server, principal))
"""

from chit.vault.cipher import Vault, aad_for, kid_of
from chit.vault.errors import DataKeyMissing, HandleDecryptError, KeyStoreUnavailable
from chit.vault.keystores import (
    DEFAULT_SERVICE,
    KEYRING_ACCOUNT,
    TRUSTED_KEYRING_BACKENDS,
    FileKeyStore,
    KeyringKeyStore,
    KeyStore,
    MemoryKeyStore,
)
from chit.vault.select import diagnose_key_store, select_key_store

__all__ = [
    "DEFAULT_SERVICE",
    "KEYRING_ACCOUNT",
    "TRUSTED_KEYRING_BACKENDS",
    "DataKeyMissing",
    "FileKeyStore",
    "HandleDecryptError",
    "KeyStore",
    "KeyStoreUnavailable",
    "KeyringKeyStore",
    "MemoryKeyStore",
    "Vault",
    "aad_for",
    "diagnose_key_store",
    "kid_of",
    "select_key_store",
]
