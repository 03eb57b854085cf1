"""Where the data key lives: the OS keyring, an opt-in key file, or process memory.

A key store holds exactly one secret, the 256-bit data key. It never decides whether a
key should be created (``Vault.unlock`` does, knowing whether sealed handles exist), and
it never falls back to another store: a store that cannot do its job raises
``KeyStoreUnavailable`` saying why and how to fix it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chit.vault.errors import KeyStoreUnavailable
from chit.vault.filestore import FileKeyStore

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

__all__ = [
    "DEFAULT_SERVICE",
    "KEYRING_ACCOUNT",
    "TRUSTED_KEYRING_BACKENDS",
    "FileKeyStore",
    "KeyStore",
    "KeyringKeyStore",
    "MemoryKeyStore",
    "backend_qualname",
]

log = logging.getLogger("chit.vault")

DEFAULT_SERVICE = "chit"
KEYRING_ACCOUNT = "data-key-v1"

#: Keyring backends that keep secrets in an OS-protected store. Everything else
#: (keyrings.alt plaintext/encrypted files, cryptfile, null, fail, chainer, custom
#: backends) is refused unless the user names it in ``CHIT_TRUSTED_KEYRING_BACKENDS``:
#: keyring would otherwise pick plaintext silently, or prompt with getpass on the tty.
TRUSTED_KEYRING_BACKENDS: frozenset[str] = frozenset(
    {
        "keyring.backends.SecretService.Keyring",
        "keyring.backends.libsecret.Keyring",
        "keyring.backends.kwallet.DBusKeyring",
        "keyring.backends.kwallet.DBusKeyringKWallet4",
        "keyring.backends.macOS.Keyring",
        "keyring.backends.Windows.WinVaultKeyring",
    }
)

_CHAINER = "keyring.backends.chainer.ChainerBackend"
_FAIL = "keyring.backends.fail.Keyring"


@runtime_checkable
class KeyStore(Protocol):
    """Holds the one data key.

    Attributes:
        name: Human description of where the key lives (shown in errors and doctor).
        kind: ``"keyring"``, ``"file"`` or ``"memory"``.
    """

    name: str
    kind: str

    def get(self) -> bytes | None:
        """Return the stored key, or None if there is none yet.

        Raises:
            KeyStoreUnavailable: the store cannot be read.
        """
        ...

    def put(self, key: bytes) -> None:
        """Store ``key`` durably.

        Raises:
            KeyStoreUnavailable: the store cannot be written.
        """
        ...


def backend_qualname(obj: object) -> str:
    """Return the ``module.QualName`` of ``obj``'s class (how backends are allowlisted)."""
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class KeyringKeyStore:
    """The data key as one item in a trusted OS keyring (service ``chit``, account
    ``data-key-v1``).

    The backend is the one ``keyring`` selects (``PYTHON_KEYRING_BACKEND``, keyringrc,
    or priority), checked against ``TRUSTED_KEYRING_BACKENDS`` plus ``extra_trusted``.
    When keyring selects its chainer, only the chainer's top backend is used, because
    the chainer's ``get`` falls through to lower backends, plaintext ones included.

    Args:
        service: Keyring service name; a different one gives a separate key (tests,
            several homes on one account).
        extra_trusted: Further backend qualnames the user explicitly trusts.

    Raises:
        KeyStoreUnavailable: keyring cannot load a backend, or the backend is untrusted.
    """

    kind: str = "keyring"

    def __init__(
        self, *, service: str = DEFAULT_SERVICE, extra_trusted: Iterable[str] = ()
    ) -> None:
        self.service = service
        self.account = KEYRING_ACCOUNT
        self._backend = resolve_keyring_backend(extra_trusted)
        self.backend = backend_qualname(self._backend)
        self.name = f"keyring {self.backend} (service {service!r})"

    def get(self) -> bytes | None:
        """Return the key from the keyring, or None if the item does not exist."""
        try:
            value = self._backend.get_password(self.service, self.account)
        except Exception as exc:  # any backend failure (locked, D-Bus gone, prompt) is fatal
            raise self._unavailable(exc) from exc
        if value is None:
            return None
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, AttributeError) as exc:
            raise KeyStoreUnavailable(
                f"the keyring item {self.service}/{self.account} in {self.backend} "
                "is not a chit data key",
                fix="restore the item from a backup, or point chit at another "
                "CHIT_KEYRING_SERVICE (sealed handles then need the original key)",
                backend=self.backend,
            ) from exc

    def put(self, key: bytes) -> None:
        """Store ``key`` (base64) in the keyring."""
        try:
            self._backend.set_password(
                self.service, self.account, base64.b64encode(key).decode("ascii")
            )
        except Exception as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: BaseException) -> KeyStoreUnavailable:
        return KeyStoreUnavailable(
            f"keyring backend {self.backend} failed: {_describe_error(exc)}",
            backend=self.backend,
        )

    def __repr__(self) -> str:
        return f"KeyringKeyStore(backend={self.backend!r}, service={self.service!r})"


def resolve_keyring_backend(extra_trusted: Iterable[str] = ()) -> KeyringBackend:
    """Return the keyring backend chit may use, or raise saying why there is none.

    Reading only: nothing is written to the keyring or to disk.

    Raises:
        KeyStoreUnavailable: keyring is not importable, fails to select a backend, or
            selects one that is not trusted. ``backend`` names the selected backend.
    """
    trusted = TRUSTED_KEYRING_BACKENDS | {name.strip() for name in extra_trusted if name}
    try:
        import keyring
        from keyring.backends.chainer import ChainerBackend

        selected = keyring.get_keyring()
    except Exception as exc:  # ModuleNotFoundError, RuntimeError from a non-viable backend
        raise KeyStoreUnavailable(
            f"keyring could not load a backend ({_describe_error(exc)})"
        ) from exc
    backend = selected
    if isinstance(selected, ChainerBackend):
        try:
            chain = list(selected.backends)
        except Exception as exc:
            raise KeyStoreUnavailable(
                f"keyring's chainer could not list its backends ({_describe_error(exc)})",
                backend=_CHAINER,
            ) from exc
        if not chain:
            raise KeyStoreUnavailable("keyring's chainer has no backends", backend=_CHAINER)
        backend = chain[0]  # never let a read fall through to a plaintext backend below
    name = backend_qualname(backend)
    if name in trusted:
        return backend
    if name == _FAIL:
        why = "no OS key store is reachable (keyring found no Secret Service, KWallet, "
        why += "macOS or Windows keychain"
        if _dbus_missing():
            why += "; DBUS_SESSION_BUS_ADDRESS is unset, so there is no session bus"
        why += ")"
    else:
        via = " (top of keyring's chainer)" if backend is not selected else ""
        why = (
            f"keyring selected {name}{via}, which is not a trusted OS key store "
            "(plaintext, no-op and prompting backends are refused; to trust it anyway, "
            f"set CHIT_TRUSTED_KEYRING_BACKENDS={name})"
        )
    raise KeyStoreUnavailable(why, backend=name)


def _dbus_missing() -> bool:
    return sys.platform.startswith("linux") and not os.environ.get("DBUS_SESSION_BUS_ADDRESS")


class MemoryKeyStore:
    """A key held in this process only: for tests and ``chit demo``.

    Keys vanish when the process exits, so anything sealed with them is unreadable by
    any later process. The name says so, because it shows up in ``chit doctor``.

    Args:
        key: A key to start with (e.g. shared between two vaults in one test).
    """

    kind: str = "memory"
    name = "memory (keys vanish when this process exits)"

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key

    def get(self) -> bytes | None:
        """Return the key held in memory, if any."""
        return self._key

    def put(self, key: bytes) -> None:
        """Hold ``key`` until the process exits."""
        self._key = bytes(key)

    def __repr__(self) -> str:
        return "MemoryKeyStore()"
