"""Reading a file chit did not write itself without hanging on it or swallowing it whole.

A path in the home or on the command line may name a FIFO (``open`` blocks until a writer
comes, forever), a device (``/dev/zero`` never ends), a socket, or a file of gigabytes.
So every such read opens non-blocking, checks the file type on the open descriptor (no
window between the check and the read), and stops at a size cap.

Errors are ``OSError`` subclasses with ``strerror`` set, so callers that already turn an
``OSError`` into one line ("cannot read PATH: …") say the right thing unchanged.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

KIB = 1024
MIB = 1024 * KIB


class NotRegularFile(OSError):
    """The path is a FIFO, device, socket or directory, not a regular file."""


class FileTooLarge(OSError):
    """The file is larger than chit reads for this purpose."""


def kind_of(mode: int) -> str:
    """A person's word for the file type in ``st_mode`` ("a FIFO", "a directory", …)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def check_regular(path: Path) -> None:
    """Raise unless ``path`` is missing or a regular file (follows symbolic links).

    For paths another library opens itself (SQLite): a FIFO there would hang it or end
    in a misleading "disk I/O error".

    Raises:
        NotRegularFile: ``path`` exists and is not a regular file.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegularFile(errno.EINVAL, f"it is {kind_of(mode)}, not a regular file", str(path))


@contextmanager
def open_regular(path: Path, *, nofollow: bool = False) -> Iterator[tuple[int, os.stat_result]]:
    """Open ``path`` read-only without blocking and yield ``(fd, stat)`` of a regular file.

    Args:
        path: The file.
        nofollow: Refuse a symbolic link (``ELOOP``) instead of following it.

    Raises:
        FileNotFoundError: (and other ``OSError``) from ``open``.
        NotRegularFile: it is a FIFO, device, socket or directory.
    """
    flags = os.O_RDONLY | _NONBLOCK | _NOCTTY | _CLOEXEC | (_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError as exc:
        raise NotRegularFile(
            errno.EISDIR, "it is a directory, not a regular file", str(path)
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(
                errno.EINVAL, f"it is {kind_of(st.st_mode)}, not a regular file", str(path)
            )
        yield fd, st
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int, path: Path) -> bytes:
    """Read an open regular file to its end, refusing more than ``limit`` bytes.

    Raises:
        FileTooLarge: the file holds more than ``limit`` bytes.
    """
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, min(256 * KIB, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise FileTooLarge(errno.EFBIG, f"it is larger than {_human(limit)}", str(path))
    return b"".join(chunks)


def read_regular(path: Path, *, limit: int, nofollow: bool = False) -> bytes:
    """Return the bytes of the regular file ``path``, at most ``limit`` of them.

    Raises:
        FileNotFoundError: (and other ``OSError``) from ``open``.
        NotRegularFile: it is a FIFO, device, socket or directory.
        FileTooLarge: it holds more than ``limit`` bytes.
    """
    with open_regular(path, nofollow=nofollow) as (fd, st):
        if st.st_size > limit:
            raise FileTooLarge(errno.EFBIG, f"it is larger than {_human(limit)}", str(path))
        return read_fd(fd, limit, path)


def unwritable_reason(directory: Path) -> str | None:
    """Why files cannot be created in ``directory`` ("read-only file system", …), or None.

    For turning a low-level failure (SQLite's "unable to open database file", ``EROFS``)
    into a line that says what is wrong with the place, not with the file.
    """
    try:
        if os.statvfs(directory).f_flag & getattr(os, "ST_RDONLY", 1):
            return f"{directory} is on a read-only file system"
    except (OSError, AttributeError):
        pass
    if os.path.isdir(directory) and not os.access(directory, os.W_OK):
        return f"{directory} is not writable by you"
    return None


def _human(size: int) -> str:
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    if size >= KIB and size % KIB == 0:
        return f"{size // KIB} KiB"
    return f"{size} bytes"
