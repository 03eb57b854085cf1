"""Reading and atomically writing ``config.toml``.

Reading uses the standard library's ``tomllib``. Writing uses a small emitter for the
subset of TOML a parsed document can contain (tables, arrays of tables, strings, numbers,
booleans, dates and inline arrays): it avoids a dependency, and ``tomllib`` reading our
own output back is what the tests check. Comments and formatting of a hand-edited file are
not preserved; the *content* of every table, known or not, is.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chit.errors import ChitError, ExitCode
from chit.home import ensure_private_dir


class ConfigError(ChitError):
    """``config.toml`` cannot be read, parsed or written (exit code ``STORE``)."""

    exit_code = ExitCode.STORE


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_ESCAPES["\r"] = "\\r"


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(value: Any) -> str:
    # bool before int: bool is an int subclass.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_table_array(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(v, Mapping) for v in value)
    )


def _emit(path: list[str], table: Mapping[str, Any], lines: list[str], header: str) -> None:
    scalars = [(k, v) for k, v in table.items() if not (_is_table(v) or _is_table_array(v))]
    children = [(k, v) for k, v in table.items() if _is_table(v) or _is_table_array(v)]
    # A header is needed for the table's own keys, and for an empty table (it would be
    # lost otherwise); a table holding only sub-tables is implied by their headers.
    if path and (scalars or not children or header.startswith("[[")):
        if lines:
            lines.append("")
        lines.append(header)
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
    for k, v in children:
        sub = [*path, k]
        dotted = ".".join(_key(p) for p in sub)
        if _is_table(v):
            _emit(sub, v, lines, f"[{dotted}]")
        else:
            for item in v:
                _emit(sub, item, lines, f"[[{dotted}]]")


def dumps(document: Mapping[str, Any]) -> str:
    """Serialize a parsed TOML document (as ``tomllib`` returns it) back to TOML text."""
    lines: list[str] = []
    _emit([], document, lines, "")
    return "\n".join(lines) + "\n" if lines else ""


def read(path: Path) -> dict[str, Any]:
    """Parse ``path``; a missing file is an empty document.

    Raises:
        ConfigError: if the file cannot be read or is not valid TOML.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


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
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
