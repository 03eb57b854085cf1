"""Who is sending an intent: ``host|pid|token`` of the Supervisor that sent it.

A ``sending`` intent is someone's in-flight call (a synchronous call may wait for its
reply up to the client's ``result_timeout``). The reconciler turns it ``unknown`` only
when its owner is gone: a dead pid on this host, or a closed Supervisor of this process.
An owner on another host cannot be probed: it is given ``result_timeout``.
"""

from __future__ import annotations

import os
import socket

from chit.processes import pid_alive

_LIVE: set[str] = set()
"""Tokens of the Supervisors open in this process."""


def owner_id(token: str) -> str:
    """The owner recorded on the intents a Supervisor with ``token`` sends."""
    return f"{socket.gethostname()}|{os.getpid()}|{token}"


def register(token: str) -> None:
    """Mark a Supervisor of this process as live."""
    _LIVE.add(token)


def unregister(token: str) -> None:
    """Mark a Supervisor of this process as closed."""
    _LIVE.discard(token)


def owner_gone(owner: str | None, *, mine: str, age_s: float, remote_wait_s: float) -> bool:
    """True when the process that sent an intent can no longer be waiting for its reply.

    Args:
        owner: the recorded owner (``None`` for intents recorded before owners were).
        mine: this Supervisor's token (its own intents are judged by the caller).
        age_s: seconds since the intent was last marked ``sending``.
        remote_wait_s: how long an owner on another host is presumed waiting.
    """
    if owner is None:
        return True
    host, _, rest = owner.partition("|")
    pid_text, _, token = rest.partition("|")
    if not pid_text.isdigit() or not token:
        return True
    if token == mine:
        return True
    if host != socket.gethostname():
        return age_s >= remote_wait_s
    pid = int(pid_text)
    if pid != os.getpid():
        return not pid_alive(pid)
    return token not in _LIVE
