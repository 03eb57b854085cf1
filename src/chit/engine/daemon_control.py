"""Asking the home's daemon about itself: its status, and to stop (never starting one).

``chit daemon status|stop|restart`` and ``chit demo``'s clean-up need no ``Engine``: a
greeted :class:`~chit.engine.socket_client.SocketClient` and one request.
"""

from __future__ import annotations

from chit.engine import rpc
from chit.engine.socket_client import SocketClient
from chit.engine.start import DaemonUnavailable
from chit.home import Home


async def daemon_status(home: Home) -> rpc.DaemonStatus:
    """Ask the running daemon for its status (never starts one).

    Raises:
        DaemonUnavailable: no daemon answers for this home.
    """
    async with SocketClient.open(home, start=False, client="status") as client:
        status: rpc.DaemonStatus = await client._request("daemon.status", rpc.NoParams())
        return status


async def stop_daemon(home: Home) -> int | None:
    """Ask the running daemon to stop; its pid, or None when none answered."""
    try:
        async with SocketClient.open(home, start=False, client="stop") as client:
            pid = client.hello.pid if client.hello else None
            await client._request("daemon.stop", rpc.NoParams())
            return pid
    except DaemonUnavailable:
        return None


__all__ = ["daemon_status", "stop_daemon"]
