"""The opt-in key file (``CHIT_KEY_STORE=file``) for machines without an OS keyring.

The file is JSON, mode 0600, owned by the user, and either holds the key as is or wraps
it with AES-256-GCM under a key derived from ``CHIT_KEY_PASSPHRASE`` with scrypt. It is
only ever written by ``FileKeyStore.put``, which ``Vault.unlock`` calls when the user
chose this store and no key exists yet; nothing else (doctor, a failing keyring) writes it.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from chit.files import KIB, FileTooLarge, NotRegularFile, open_regular, read_fd
from chit.home import UnsafeHome, ensure_private_dir
from chit.vault.errors import KeyStoreUnavailable

log = logging.getLogger("chit.vault")

FORMAT = "chit-data-key"
VERSION = 1
WRAP_NONE = "none"
WRAP_SCRYPT = "scrypt-aesgcm"
#: scrypt cost: 2**15 * 8 * 128 B = 32 MiB and ~0.1 s per unlock (once per process).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
_MAX_SCRYPT_N = 2**22  # refuse absurd costs read from a (possibly corrupted) file
_WRAP_AAD = b"chit data key file v1"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_POSIX = os.name == "posix"
MAX_KEY_FILE_BYTES = 64 * KIB


class FileKeyStore:
    """The data key in ``home.key_file``, optionally wrapped with a passphrase.

    Args:
        path: The key file (``Home.key_file``).
        passphrase: Wraps a new key file, and is required to read a wrapped one.
            Usually ``CHIT_KEY_PASSPHRASE``; None or empty means no passphrase.
    """

    kind: str = "file"

    def __init__(self, path: Path, *, passphrase: str | None = None) -> None:
        self.path = Path(path)
        self._passphrase = passphrase or None
        wrap = ", passphrase-wrapped" if self._passphrase else ""
        self.name = f"key file {self.path}{wrap}"

    def get(self) -> bytes | None:
        """Read and unwrap the key; None if the file does not exist.

        Raises:
            KeyStoreUnavailable: the file is not private, not ours, corrupt, or needs a
                (different) passphrase.
        """
        raw = self._read_private()
        if raw is None:
            return None
        doc = self._parse(raw)
        if doc["wrap"] == WRAP_NONE:
            return _b64(doc, "key", self)
        return self._unwrap(doc)

    def put(self, key: bytes) -> None:
        """Create the key file atomically (O_EXCL 0600 temp file, fsync, link, fsync dir).

        An existing key file is never overwritten: if another process created one first,
        this call writes nothing and ``Vault.unlock``'s read-back picks up that key.

        Raises:
            KeyStoreUnavailable: the file cannot be written.
        """
        doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self._passphrase:
            salt, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
            kek = _kek(self._passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
            doc.update(
                wrap=WRAP_SCRYPT,
                kdf={"n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P, "salt": _enc(salt)},
                nonce=_enc(nonce),
                key=_enc(AESGCM(kek).encrypt(nonce, key, _WRAP_AAD)),
            )
        else:
            doc.update(wrap=WRAP_NONE, key=_enc(key))
        payload = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
        try:
            if not _atomic_write_private(self.path, payload):
                log.info("key file %s already exists; keeping it", self.path)
        except (OSError, UnsafeHome) as exc:
            why = exc.strerror if isinstance(exc, OSError) else exc.message
            raise KeyStoreUnavailable(
                f"cannot write the key file {self.path} ({why or exc})",
                fix=f"make {self.path.parent} writable by you, or choose another CHIT_HOME",
                backend="file",
            ) from exc

    def _read_private(self) -> bytes | None:
        # Non-blocking open, type checked on the descriptor: a FIFO named data-key.json
        # once hung every command (doctor included) waiting for a writer.
        try:
            with open_regular(self.path, nofollow=True) as (fd, st):
                return self._read_checked(fd, st)
        except FileNotFoundError:
            return None
        except NotRegularFile as exc:
            raise self._refuse(
                f"is not a regular file ({exc.strerror})", f"remove or replace {self.path}"
            ) from exc
        except FileTooLarge as exc:
            raise self._corrupt(f"{exc.strerror}; a key file is a few hundred bytes") from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._refuse(
                    "is a symbolic link", f"replace it with the file itself: {self.path}"
                ) from exc
            raise self._refuse(
                f"cannot be read ({exc.strerror or exc})", f"check {self.path}"
            ) from exc

    def _read_checked(self, fd: int, st: os.stat_result) -> bytes:
        """Refuse a key file that is not ours alone, then read it (size-capped)."""
        if _POSIX:
            # Why refuse rather than tighten: a readable key may already have been copied.
            if st.st_uid != os.geteuid():
                raise self._refuse(
                    f"belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})",
                    f"chown $(id -u) {self.path} && chmod 600 {self.path}",
                )
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o077:
                raise self._refuse(
                    f"is readable or writable by group/others (mode {mode:04o}); the key "
                    "may have been exposed",
                    f"chmod 600 {self.path} (and consider the key compromised if others "
                    "could read it)",
                )
        return read_fd(fd, MAX_KEY_FILE_BYTES, self.path)

    def _parse(self, raw: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise self._corrupt("it is not JSON") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise self._corrupt("it is not a chit data key file")
        if doc.get("version") != VERSION:
            raise self._corrupt(f"unsupported version {doc.get('version')!r}")
        if doc.get("wrap") not in (WRAP_NONE, WRAP_SCRYPT):
            raise self._corrupt(f"unknown wrap {doc.get('wrap')!r}")
        return doc

    def _unwrap(self, doc: dict[str, Any]) -> bytes:
        if not self._passphrase:
            raise KeyStoreUnavailable(
                f"the key file {self.path} is protected by a passphrase and "
                "CHIT_KEY_PASSPHRASE is not set",
                fix="set CHIT_KEY_PASSPHRASE to the passphrase the key file was created with",
                backend="file",
            )
        kdf = doc.get("kdf")
        if not isinstance(kdf, dict):
            raise self._corrupt("the kdf parameters are missing")
        n, r, p = _cost(kdf, "n"), _cost(kdf, "r"), _cost(kdf, "p")
        if n < 2 or n > _MAX_SCRYPT_N or n & (n - 1) or not r or not p or r * p > 64:
            raise self._corrupt("the kdf parameters are invalid")
        salt, nonce, wrapped = (
            _b64(kdf, "salt", self),
            _b64(doc, "nonce", self),
            _b64(doc, "key", self),
        )
        kek = _kek(self._passphrase, salt, n, r, p)
        try:
            return AESGCM(kek).decrypt(nonce, wrapped, _WRAP_AAD)
        except (InvalidTag, ValueError) as exc:
            raise KeyStoreUnavailable(
                f"the passphrase in CHIT_KEY_PASSPHRASE does not open the key file {self.path} "
                "(wrong passphrase, or the file was altered)",
                fix="set CHIT_KEY_PASSPHRASE to the passphrase the key file was created with",
                backend="file",
            ) from exc

    def _refuse(self, why: str, fix: str) -> KeyStoreUnavailable:
        return KeyStoreUnavailable(f"the key file {self.path} {why}", fix=fix, backend="file")

    def _corrupt(self, why: str) -> KeyStoreUnavailable:
        return KeyStoreUnavailable(
            f"the key file {self.path} is unreadable: {why}",
            fix="restore the key file from a backup (without the original key, sealed "
            "handles cannot be opened)",
            backend="file",
        )

    def __repr__(self) -> str:
        return f"FileKeyStore({str(self.path)!r}, wrapped={self._passphrase is not None})"


def _kek(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))


def _cost(kdf: dict[str, Any], name: str) -> int:
    value = kdf.get(name)
    # bool is an int subclass; a corrupted file must not smuggle True in as a cost.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def _enc(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64(doc: dict[str, Any], field: str, store: FileKeyStore) -> bytes:
    value = doc.get(field)
    if not isinstance(value, str):
        raise store._corrupt(f"field {field!r} is missing")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise store._corrupt(f"field {field!r} is not base64") from exc


def _atomic_write_private(path: Path, payload: bytes) -> bool:
    """Create ``path`` with ``payload`` so that readers see either nothing or all of it.

    The temp file is created 0600 with O_EXCL (never through an existing file or
    symlink) and fsynced, then hard-linked to ``path``, which fails if ``path`` exists:
    two processes creating the first key at once cannot overwrite each other's key (the
    loser reads the winner's back). Where hard links are unsupported, ``os.replace`` is
    the fallback. Finally the directory is fsynced so the new name survives a power loss.

    Returns:
        False if ``path`` already existed (nothing was written), else True.
    """
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        try:
            if _POSIX:
                os.fchmod(fd, 0o600)  # the umask can only remove bits, but be explicit
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            os.replace(tmp, path)  # no hard links here (e.g. some FUSE/SMB mounts)
    finally:
        tmp.unlink(missing_ok=True)
    if _POSIX:
        dfd = os.open(path.parent, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return True
