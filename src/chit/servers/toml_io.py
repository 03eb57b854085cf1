"""Reading and atomically writing ``config.toml``.

Reading parses with the standard library's ``tomllib`` (strict, and what validation
trusts). Editing goes through ``tomlkit``, which keeps a hand-edited file's comments,
order and formatting: ``chit servers add`` changes its one table and nothing else.
Every read opens the file non-blocking, checks it is a regular file and caps its size
(``chit.files``), so a FIFO or a device named ``config.toml`` is an error, not a hang.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.toml_document import TOMLDocument

from chit.errors import ChitError, ExitCode
from chit.files import MIB, read_regular
from chit.home import ensure_private_dir

MAX_CONFIG_BYTES = 4 * MIB
"""A config file larger than this is refused (a hand-written one is a few KiB)."""


class ConfigError(ChitError):
    """``config.toml`` cannot be read, parsed or written (exit code ``STORE``)."""

    exit_code = ExitCode.STORE


def dumps(document: Mapping[str, Any]) -> str:
    """Serialize a TOML document (a ``tomlkit`` document, or plain data) to TOML text."""
    return tomlkit.dumps(document)


def _read_text(path: Path) -> str | None:
    try:
        data = read_regular(path, limit=MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: it is not UTF-8 ({exc.reason})") from exc


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path} is not valid TOML: it is nested too deeply") from None


def read(path: Path) -> dict[str, Any]:
    """Parse ``path``; a missing file is an empty document.

    Raises:
        ConfigError: if the file cannot be read or is not valid TOML.
    """
    text = _read_text(path)
    return {} if text is None else _parse(path, text)


def read_for_edit(path: Path) -> tuple[dict[str, Any], TOMLDocument]:
    """Return ``path`` parsed twice: plain data (validated) and an editable ``tomlkit``
    document that writes back with the file's comments and layout.

    Raises:
        ConfigError: if the file cannot be read or is not valid TOML.
    """
    text = _read_text(path)
    if text is None:
        return {}, tomlkit.document()
    plain = _parse(path, text)
    try:
        return plain, tomlkit.parse(text)
    except (TOMLKitError, RecursionError) as exc:  # tomllib accepted it
        raise ConfigError(f"{path} cannot be edited: {exc}") from exc


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never half.

    The bytes go to a fresh 0600 temporary file in the same directory, are fsynced, and
    the file is renamed over ``path``; the directory is fsynced so the rename survives a
    crash. On any failure the temporary file is removed and ``path`` is untouched.

    Raises:
        ConfigError: if the file cannot be written.
    """
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from exc
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Durability of the rename; some platforms cannot open a directory, which only
    # weakens durability, so it is not an error.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock for a read-modify-write of ``path``.

    Two ``chit servers add`` at once would otherwise lose one of the updates.
    """
    ensure_private_dir(path.parent)
    try:
        import fcntl
    except ImportError:  # Windows: no advisory lock; last writer wins
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot change {path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
