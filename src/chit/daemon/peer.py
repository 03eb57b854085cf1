"""Who is on the other end of a Unix socket: the kernel's word, not the peer's.

Linux answers ``SO_PEERCRED`` (pid, uid, gid of the connecting process, recorded at
``connect``); macOS and the BSDs answer ``LOCAL_PEERCRED`` (an ``xucred``: version, uid,
groups), which is what ``getpeereid(3)`` reads. Python wraps neither, so both are read
with ``getsockopt``.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass

_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
_XUCRED = struct.Struct("=IiH")  # version, uid, ngroups (the group list follows)


@dataclass(frozen=True)
class Peer:
    """The connecting process (``pid`` is None where the platform does not say)."""

    uid: int
    pid: int | None = None


def peer_of(sock: socket.socket) -> Peer:
    """The credentials of ``sock``'s peer.

    Raises:
        OSError: the platform cannot tell (then the connection must be refused).
    """
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        return Peer(uid=uid, pid=pid)
    if sys.platform == "darwin" or "bsd" in sys.platform:
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, 256)
        _version, uid, _ngroups = _XUCRED.unpack_from(raw)
        return Peer(uid=uid)
    raise OSError("this platform cannot tell who connected to a Unix socket")
