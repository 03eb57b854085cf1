"""Choosing the key store from the environment, and describing it for ``chit doctor``.

``CHIT_KEY_STORE`` is ``keyring`` (default), ``file`` or ``memory``. The choice is
explicit: a failing keyring is reported, never replaced by the file or memory store.

Other settings:
    CHIT_KEYRING_SERVICE: keyring service name (default ``chit``); give each home or
        test run its own so their keys do not clash.
    CHIT_TRUSTED_KEYRING_BACKENDS: comma-separated backend qualnames to trust in
        addition to the OS stores (e.g. a company's own keyring backend).
    CHIT_KEY_PASSPHRASE: wraps a new key file, and opens a wrapped one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from chit.home import Home
from chit.vault.cipher import KEY_BYTES, kid_of
from chit.vault.errors import KEYRING_FIX, KeyStoreUnavailable
from chit.vault.keystores import (
    DEFAULT_SERVICE,
    FileKeyStore,
    KeyringKeyStore,
    KeyStore,
    MemoryKeyStore,
)

KINDS = ("keyring", "file", "memory")
MISSING_KEY_FIX = (
    "restore the original key (from a backup, or point CHIT_KEY_STORE, CHIT_KEYRING_SERVICE "
    "and CHIT_HOME at where it is); chit never makes a new key over sealed values"
)


def _choice(env: Mapping[str, str]) -> str:
    choice = env.get("CHIT_KEY_STORE", "").strip().lower() or "keyring"
    if choice not in KINDS:
        raise KeyStoreUnavailable(
            f"CHIT_KEY_STORE={choice!r} is not one of {', '.join(KINDS)}",
            fix="set CHIT_KEY_STORE to keyring (the default), file or memory",
        )
    return choice


def _trusted(env: Mapping[str, str]) -> list[str]:
    raw = env.get("CHIT_TRUSTED_KEYRING_BACKENDS", "")
    return [name.strip() for name in raw.split(",") if name.strip()]


def select_key_store(home: Home, environ: Mapping[str, str] | None = None) -> KeyStore:
    """Return the key store the environment asks for; nothing is read or written yet.

    Args:
        home: The chit home (the file store lives at ``home.key_file``).
        environ: Settings to read (default ``os.environ``).

    Raises:
        KeyStoreUnavailable: the choice is invalid, or the keyring has no trusted backend.
    """
    env = os.environ if environ is None else environ
    choice = _choice(env)
    if choice == "file":
        return FileKeyStore(home.key_file, passphrase=env.get("CHIT_KEY_PASSPHRASE") or None)
    if choice == "memory":
        return MemoryKeyStore()
    service = env.get("CHIT_KEYRING_SERVICE", "").strip() or DEFAULT_SERVICE
    return KeyringKeyStore(service=service, extra_trusted=_trusted(env))


def diagnose_key_store(
    home: Home,
    environ: Mapping[str, str] | None = None,
    *,
    expected_kid: bytes | None = None,
    sealed: int = 0,
) -> dict[str, Any]:
    """Describe the selected key store for ``chit doctor --json``; read-only, never raises.

    Args:
        home: The chit home.
        environ: Settings (default ``os.environ``).
        expected_kid: The key id the home recorded (``meta.vault_kid``), if any.
        sealed: How many sealed values the home holds (handles and server secrets).

    Returns:
        ``kind`` (keyring/file/memory or the invalid value), ``backend`` (keyring backend
        qualname, ``"file"``, ``"memory"`` or None), ``usable`` (bool), ``why`` (what is
        wrong, or a note), ``fix`` (None when usable), ``file`` (the key file path for the
        file store, else None), ``key_present`` (bool, or None if unknown), ``kid`` (hex
        key id of the stored key, or None), ``expected_kid`` (hex, or None) and
        ``sealed`` (the count given). A missing key with a recorded key id or sealed
        values, or a stored key with another id, is not usable: it is the state in which
        ``Vault.unlock`` raises ``DataKeyMissing``.
    """
    env = os.environ if environ is None else environ
    kind = env.get("CHIT_KEY_STORE", "").strip().lower() or "keyring"
    report: dict[str, Any] = {
        "kind": kind,
        "backend": None,
        "usable": False,
        "why": None,
        "fix": None,
        "file": str(home.key_file) if kind == "file" else None,
        "key_present": None,
        "kid": None,
        "expected_kid": expected_kid.hex() if expected_kid is not None else None,
        "sealed": sealed,
    }
    try:
        store = select_key_store(home, env)
        report["backend"] = getattr(store, "backend", store.kind)
        # get() only reads: no key, file or keyring item is ever created here.
        key = store.get()
    except KeyStoreUnavailable as exc:
        report.update(why=exc.why, fix=exc.fix)
        if exc.backend and report["backend"] is None:
            report["backend"] = exc.backend
        return report
    except Exception as exc:  # doctor must report, not crash
        report.update(why=f"{type(exc).__name__}: {exc}", fix=KEYRING_FIX)
        return report
    report["key_present"] = key is not None
    if key is not None and len(key) != KEY_BYTES:
        report.update(
            why=f"{store.name} holds a malformed data key ({len(key)} bytes)",
            fix="restore the original key from a backup",
        )
        return report
    if key is None and (expected_kid is not None or sealed):
        what = f"data key {expected_kid.hex()}" if expected_kid is not None else "the data key"
        report.update(
            why=f"{what} is missing from {store.name}; {sealed} sealed value(s) in this home "
            "cannot be opened",
            fix=MISSING_KEY_FIX,
        )
        return report
    if key is not None and expected_kid is not None and kid_of(key) != expected_kid:
        report.update(
            kid=kid_of(key).hex(),
            why=f"{store.name} holds data key {kid_of(key).hex()}, but this home's sealed "
            f"values need {expected_kid.hex()}",
            fix=MISSING_KEY_FIX,
        )
        return report
    report["usable"] = True
    if key is not None:
        report["kid"] = kid_of(key).hex()
    if kind == "memory":
        report["why"] = store.name
    elif key is None:
        report["why"] = "no data key yet; it is created on first use"
    return report
