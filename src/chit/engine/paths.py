"""Where the daemon of a home keeps its socket, locks and logs.

Everything lives in the home (0700), except the socket when its path would not fit in
``sun_path`` (104 bytes on macOS, 108 on Linux, counting the terminating NUL): then it
goes to a short per-user runtime directory (``$XDG_RUNTIME_DIR/chit`` or
``/tmp/chit-UID``, 0700 and ours, checked) under a name derived from the home's path,
so every client of the same home computes the same place without asking anyone. The
daemon records the path it bound in ``daemon.json`` (``chit daemon status`` shows it).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from chit.errors import ChitError
from chit.home import Home, ensure_private_dir

SUN_PATH_MAX = 100
"""Longest socket path used as is (bytes; below both platforms' limits, with margin)."""

LOG_MAX_BYTES = 5 * 1024 * 1024
"""A log file (the daemon's, a server's) is rotated past this size."""

LOG_KEEP = 2
"""Rotated generations kept (``NAME.log.1``, ``NAME.log.2``)."""


class UnsafeRuntimeDir(ChitError):
    """The short socket directory exists but is not private to this user."""


@dataclass(frozen=True)
class DaemonPaths:
    """The daemon's files for one home."""

    home: Home

    @property
    def lock(self) -> Path:
        """Held (``flock``) by the running daemon for its whole life; holds its pid."""
        return self.home.root / "daemon.lock"

    @property
    def start_lock(self) -> Path:
        """Held by a client while it starts a daemon, so two starters spawn one."""
        return self.home.root / "daemon-start.lock"

    @property
    def info(self) -> Path:
        """``daemon.json``: pid, socket path, versions, start time of the running daemon."""
        return self.home.root / "daemon.json"

    @property
    def logs(self) -> Path:
        """The home's log directory."""
        return self.home.root / "logs"

    @property
    def log(self) -> Path:
        """The daemon's own log (its stdout and stderr when started detached)."""
        return self.logs / "daemon.log"

    def server_log(self, name: str) -> Path:
        """Where a stdio server's stderr goes (``logs/servers/NAME.log``)."""
        return self.logs / "servers" / f"{name}.log"

    @property
    def socket(self) -> Path:
        """The control socket: in the home, or in the short runtime directory."""
        inside = self.home.root / "daemon.sock"
        if len(os.fsencode(str(inside))) <= SUN_PATH_MAX:
            return inside
        digest = hashlib.sha256(os.fsencode(str(self.home.root))).hexdigest()[:16]
        return runtime_dir() / f"{digest}.sock"


def runtime_dir() -> Path:
    """A short directory private to this user for sockets whose home path is too long.

    Raises:
        UnsafeRuntimeDir: it exists but belongs to someone else or is open to others.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    base = Path(xdg) / "chit" if xdg and Path(xdg).is_dir() else Path(f"/tmp/chit-{os.getuid()}")
    if not os.path.lexists(base):
        ensure_private_dir(base)
    info = base.lstat()
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or stat.S_IMODE(info.st_mode) & 0o077
    ):
        raise UnsafeRuntimeDir(
            f"{base} is not a private directory of this user; remove it, or use a shorter"
            " CHIT_HOME so the socket can live in the home"
        )
    if len(os.fsencode(str(base / ("x" * 16 + ".sock")))) > SUN_PATH_MAX:
        raise UnsafeRuntimeDir(f"no short directory for chit's socket ({base} is too long)")
    return base
