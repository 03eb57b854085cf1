"""Sealing server secrets with the vault, behind a small seam tests can replace.

The registry never holds a vault itself: it holds a *factory* that unlocks one on first
use, so ``chit servers list`` and ``remove`` work while the key store is unavailable and
only the commands that seal or open a secret need it. Tests pass a factory that builds a
``Vault`` over ``MemoryKeyStore``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Protocol

from chit.home import Home
from chit.servers.spec import SEALED_PREFIX, is_sealed, is_secret_env


class Sealer(Protocol):
    """What the registry needs from ``chit.vault.Vault``."""

    def seal(self, secret: str, aad: bytes) -> bytes:
        """Encrypt ``secret`` bound to ``aad``."""
        ...

    def open(self, blob: bytes, aad: bytes) -> str:
        """Decrypt a blob sealed with the same ``aad``."""
        ...

    def fingerprint(self, secret: str) -> str:
        """A short, non-reversible identifier of ``secret`` for listings."""
        ...


SealerFactory = Callable[[], Sealer]
"""Unlocks (or returns the already unlocked) vault; raises ``KeyStoreUnavailable``."""


def secret_aad(server: str, field: str, key: str) -> bytes:
    """The associated data binding a sealed value to its server, field and key.

    Copying a sealed value to another server or variable makes it fail to open.
    """
    from chit.vault import aad_for

    return aad_for("server-secret", server, field, key)


def seal_value(sealer: Sealer, server: str, field: str, key: str, secret: str) -> str:
    """Seal ``secret`` and return its stored form ``sealed:v1:<base64>``."""
    blob = sealer.seal(secret, secret_aad(server, field, key))
    return SEALED_PREFIX + base64.b64encode(blob).decode("ascii")


def open_value(sealer: Sealer, server: str, field: str, key: str, stored: str) -> str:
    """Return the plaintext of a stored value (plaintext values are returned as-is).

    Raises:
        HandleDecryptError: if the sealed value was tampered with, moved, or sealed with
            another data key.
    """
    if not is_sealed(stored):
        return stored
    try:
        blob = base64.b64decode(stored[len(SEALED_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        from chit.vault import HandleDecryptError

        raise HandleDecryptError(
            f"server {server!r}: {field}.{key} is not a valid sealed value"
        ) from None
    return sealer.open(blob, secret_aad(server, field, key))


def must_seal(field: str, key: str, value: str, force: frozenset[str] = frozenset()) -> bool:
    """Return True when a plaintext ``field.key = value`` must be sealed before storing.

    Every header value is sealed (headers on MCP endpoints are overwhelmingly
    credentials); environment values are sealed when their name looks secret, when the
    value is a URL with a password, or when the user asked (``force``).
    """
    if is_sealed(value):
        return False
    if field == "headers":
        return True
    return key in force or is_secret_env(key, value)


def seal_mapping(
    sealer: Callable[[], Sealer],
    server: str,
    field: str,
    values: Mapping[str, str],
    fingerprints: dict[str, str],
    force: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Return ``values`` with every value that must be sealed sealed.

    ``fingerprints`` receives ``"field.key" → fingerprint`` for each newly sealed value.
    ``sealer`` is only called when something needs sealing.
    """
    out: dict[str, str] = {}
    for key, value in values.items():
        if must_seal(field, key, value, force):
            vault = sealer()
            out[key] = seal_value(vault, server, field, key, value)
            fingerprints[f"{field}.{key}"] = vault.fingerprint(value)
        else:
            out[key] = value
    return out


def vault_factory(home: Home, environ: Mapping[str, str] | None = None) -> SealerFactory:
    """Return a factory that unlocks the vault of ``home`` once, on first use.

    The data key id recorded in the store (``meta.vault_kid``) is passed as the expected
    kid, so a lost key is ``DataKeyMissing`` instead of a silent new key; on a fresh home
    the new kid is recorded.
    """
    cache: list[Sealer] = []

    def unlock() -> Sealer:
        if not cache:
            from chit.servers._kid import record_kid, recorded_kid
            from chit.vault import Vault, select_key_store

            store = select_key_store(home, environ=environ)
            expected = recorded_kid(home)
            vault = Vault.unlock(store, expected)
            # A memory key dies with this process: recording its id would make every
            # later process report DataKeyMissing for a home that has nothing to lose.
            if expected is None and getattr(store, "kind", None) != "memory":
                record_kid(home, vault.kid)
            cache.append(vault)
        return cache[0]

    return unlock
