"""Where a stdio server's stderr goes: ``logs/servers/NAME.log`` in the home, never a terminal.

A server's stderr is its own business (banners, debug chatter, stack traces) and may say
anything; it must not reach the terminal of whoever happened to start the session. Each
server gets one append-mode file per process (opened once, shared by every session of
that server), which ``chit logs NAME`` shows. Files are 0600 in the 0700 home.

Size cap: :func:`rotate_logs` copies a file past ``max_bytes`` to ``NAME.log.1`` (older
generations move along) and truncates it. The server keeps writing with ``O_APPEND`` into
the same file, so nothing has to be reopened; lines written between the copy and the
truncation are lost (the trade-off logrotate's ``copytruncate`` makes too).
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path
from typing import TextIO

from chit import clock
from chit.errors import ChitError
from chit.files import open_regular
from chit.home import Home, ensure_private_dir

MAX_BYTES = 5 * 1024 * 1024
KEEP = 2

_open: dict[Path, TextIO] = {}
_lock = threading.Lock()


def server_log_path(home: Home, name: str) -> Path:
    """The log file of server ``name`` (names are validated file-name safe)."""
    return home.root / "logs" / "servers" / f"{name}.log"


def open_server_log(home: Home, name: str) -> TextIO:
    """The append-mode file a stdio server of ``name`` writes its stderr to."""
    path = server_log_path(home, name)
    with _lock:
        handle = _open.get(path)
        if handle is not None and not handle.closed:
            return handle
        ensure_private_dir(path.parent.parent)  # logs/ too: a parent made on the way
        ensure_private_dir(path.parent)  # would get the umask's mode, not 0700
        # O_NONBLOCK: a FIFO planted here must fail, not hang the engine (a regular
        # file ignores the flag); anything but a regular file is refused.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise ChitError(f"cannot open the server log {path}: {exc.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ChitError(f"cannot use the server log {path}: it is not a regular file")
        handle = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
        _open[path] = handle
        return handle


def rotate(path: Path, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> bool:
    """Copy-and-truncate ``path`` once it passed ``max_bytes``; True when it did."""
    try:
        info = path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size <= max_bytes:
        return False
    for n in range(keep, 1, -1):
        newer = path.with_name(f"{path.name}.{n - 1}")
        if newer.exists():
            os.replace(newer, path.with_name(f"{path.name}.{n}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    os.chmod(path.with_name(f"{path.name}.1"), 0o600)
    with open(path, "r+b") as handle:
        handle.truncate(0)
    return True


def rotate_logs(home: Home, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> list[Path]:
    """Rotate every server log of ``home`` that passed ``max_bytes``."""
    folder = home.root / "logs" / "servers"
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.log")) if rotate(p, max_bytes, keep)]


RECENT_S = 120.0
"""A log line older than this says nothing about a failure happening now."""


def last_line(home: Home, name: str) -> str:
    """The last non-empty line a server wrote to stderr recently ("" when none), bounded."""
    path = server_log_path(home, name)
    try:
        with open_regular(path) as (fd, st):  # a FIFO here must not hang anyone
            if clock.wall() - st.st_mtime > RECENT_S:
                return ""
            os.lseek(fd, max(0, st.st_size - 2048), os.SEEK_SET)
            tail = os.read(fd, 2048).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return "".join(ch for ch in lines[-1][:200] if ch.isprintable()) if lines else ""


def server_pids(home: Home) -> dict[str, int]:
    """This process's stdio server children by server name (Linux; {} elsewhere).

    A child is known by its stderr: the log file it writes to names the server.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    folder = str(server_log_path(home, "x").parent) + os.sep
    me = os.getpid()
    found: dict[str, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            target = os.readlink(entry / "fd" / "2")
        except (OSError, ValueError, IndexError):
            continue
        if target.startswith(folder) and target.endswith(".log"):
            found[target[len(folder) : -len(".log")]] = int(entry.name)
    return found
