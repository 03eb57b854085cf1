"""Sealed handles: AES-256-GCM under one data key, bound to their row by associated data.

Blob layout (bytes): ``01 | kid (8) | nonce (12) | ciphertext + tag (16)``. The key id
(``kid``) is an HMAC of the key, so it can be stored next to the ciphertexts and compared
on every start without revealing anything about the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chit.vault.errors import DataKeyMissing, HandleDecryptError, KeyStoreUnavailable
from chit.vault.keystores import KeyStore

log = logging.getLogger("chit.vault")

FORMAT = b"\x01"
KEY_BYTES = 32
KID_BYTES = 8
NONCE_BYTES = 12
TAG_BYTES = 16
_HEADER = 1 + KID_BYTES + NONCE_BYTES
# Domain-separation labels: the data key is never used directly as an HMAC key for two
# different purposes.
_KID_LABEL = b"chit key id v1"
_FP_LABEL = b"chit fingerprint key v1"
_DIGEST_LABEL = b"chit digest key v1"


def kid_of(key: bytes) -> bytes:
    """Return the 8-byte key id of ``key`` (safe to store and print)."""
    return hmac.new(key, _KID_LABEL, hashlib.sha256).digest()[:KID_BYTES]


def aad_for(*parts: str) -> bytes:
    """Return the associated data binding a sealed handle to its row.

    Canonical JSON of the parts (e.g. receipt id, server, principal): unambiguous where
    plain concatenation is not (``"ab","c"`` vs ``"a","bc"``).

    Raises:
        TypeError: a part is not a string.
    """
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"aad_for takes strings, got {type(part).__name__}")
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Vault:
    """Seals and opens handles with the data key of one key store.

    Build it with ``Vault.unlock``; the key never leaves this object (no attribute,
    repr or log shows it).

    Attributes:
        kid: The key id, 8 bytes; record it in the database with the first sealed handle.
        store_name: Where the key lives (for messages and ``chit doctor``).
    """

    __slots__ = ("_aead", "_digest_key", "_fp_key", "kid", "store_name")

    def __init__(self, key: bytes, store_name: str) -> None:
        if len(key) != KEY_BYTES:
            raise KeyStoreUnavailable(
                f"{store_name} holds a malformed data key ({len(key)} bytes, expected {KEY_BYTES})",
                fix="restore the original key from a backup; chit does not replace a key "
                "that may still be needed",
            )
        self._aead = AESGCM(key)
        self._fp_key = hmac.new(key, _FP_LABEL, hashlib.sha256).digest()
        self._digest_key = hmac.new(key, _DIGEST_LABEL, hashlib.sha256).digest()
        self.kid = kid_of(key)
        self.store_name = store_name

    @classmethod
    def unlock(cls, store: KeyStore, expected_kid: bytes | None) -> Vault:
        """Load the data key from ``store``, creating it only for a fresh database.

        Args:
            store: The selected key store.
            expected_kid: The key id recorded with existing sealed handles, or None when
                there are none (only then may a new key be created).

        Returns:
            A vault holding the key.

        Raises:
            KeyStoreUnavailable: the store fails, or accepts a new key but does not
                return it (a no-op backend would otherwise lose every handle).
            DataKeyMissing: ``expected_kid`` is set but the store has no key or another one.
        """
        key = store.get()
        if key is None:
            if expected_kid is not None:
                raise DataKeyMissing(
                    f"data key {expected_kid.hex()} for the existing sealed handles is not in "
                    f"{store.name}; it was deleted, or chit is looking at another key store "
                    "(check CHIT_KEY_STORE, CHIT_KEYRING_SERVICE, CHIT_HOME and the keyring "
                    "session). Restore the key; chit will not create a new one over handles "
                    "it could then never open"
                )
            key = AESGCM.generate_key(bit_length=KEY_BYTES * 8)
            store.put(key)
            back = store.get()
            if back is None:
                raise KeyStoreUnavailable(
                    f"{store.name} accepted the data key but did not return it (a no-op or "
                    "broken backend; handles sealed with it would be lost)"
                )
            if back != key:
                # Another process created the key at the same moment and its write won;
                # the store's copy is the one every later process will read, so use it.
                log.info("data key %s created concurrently in %s", kid_of(back).hex(), store.name)
                key = back
            else:
                log.info("created data key %s in %s", kid_of(key).hex(), store.name)
        vault = cls(key, store.name)
        if expected_kid is not None and vault.kid != expected_kid:
            raise DataKeyMissing(
                f"{store.name} holds data key {vault.kid.hex()}, but the sealed handles need "
                f"{expected_kid.hex()}; chit is looking at another key store or the key was "
                "replaced (check CHIT_KEY_STORE, CHIT_KEYRING_SERVICE and CHIT_HOME). Restore "
                "the original key"
            )
        log.debug("unlocked data key %s from %s", vault.kid.hex(), store.name)
        return vault

    def seal(self, secret: str, aad: bytes) -> bytes:
        """Encrypt ``secret`` bound to ``aad`` (see ``aad_for``); a fresh nonce every time."""
        nonce = os.urandom(NONCE_BYTES)
        blob = FORMAT + self.kid + nonce + self._aead.encrypt(nonce, secret.encode("utf-8"), aad)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("sealed handle %s", self.fingerprint(secret))
        return blob

    def open(self, blob: bytes, aad: bytes) -> str:
        """Decrypt a blob from ``seal`` with the same ``aad``.

        Raises:
            HandleDecryptError: the blob is malformed, from another key, tampered with,
                or sealed for another row (different ``aad``).
        """
        blob = bytes(blob)
        if len(blob) < _HEADER + TAG_BYTES or blob[:1] != FORMAT:
            raise HandleDecryptError("sealed handle is malformed or in an unknown format")
        kid = blob[1 : 1 + KID_BYTES]
        if kid != self.kid:
            raise HandleDecryptError(
                f"sealed handle was made with data key {kid.hex()}, not {self.kid.hex()} "
                f"({self.store_name})"
            )
        try:
            plain = self._aead.decrypt(blob[1 + KID_BYTES : _HEADER], blob[_HEADER:], aad)
            secret = plain.decode("utf-8")
        except (InvalidTag, UnicodeDecodeError):
            raise HandleDecryptError(
                "sealed handle failed authentication: it was altered or belongs to another row"
            ) from None
        if log.isEnabledFor(logging.DEBUG):
            log.debug("opened handle %s", self.fingerprint(secret))
        return secret

    def fingerprint(self, secret: str) -> str:
        """Return a keyed 12-hex-char fingerprint of ``secret``, stable for this key.

        Safe for logs and exports: without the key it cannot be reversed or checked
        against guesses.
        """
        return hmac.new(self._fp_key, secret.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    def digest_key(self) -> bytes:
        """Return the 32-byte subkey for keyed argument and result digests.

        Derived from the data key under its own label, so it is stable for this key,
        distinct from the fingerprint subkey and the key id, and reveals nothing about
        the data key. Pass it as ``key`` to ``args_digest``/``result_digest``: a plain
        SHA-256 of small arguments (``{"confirm": true}``) can be guessed, a keyed one
        cannot without the key.
        """
        return self._digest_key

    def __repr__(self) -> str:
        return f"Vault(kid={self.kid.hex()}, store={self.store_name!r})"
