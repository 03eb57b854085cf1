"""Task status notifications read straight off a stdio server's pipes, coalesced per task.

Through the SDK, every ``notifications/tasks`` (2026) or ``notifications/tasks/status``
(2025) frame was validated as a JSON-RPC message, handed to the session's receive loop,
given a task of its own, validated again against the binding's params model, queued in
a FIFO of 256 (the oldest *dropped* when it was full — a task's end among them), dumped
back to a dict and only then delivered. A server with thousands of live tasks pushes a
status-message change of each of them about once a second, so that was most of a
client's CPU under load, and a burst could lose the very notification saying a task
ended. Here the pipes' reader recognises such a frame (:func:`task_note`) and offers it
to a :class:`HintQueue`: at most one pending notification per task (the newest), and
one task delivering them in arrival order. Nothing is dropped; a task that changed
status more than once before its notification was delivered is delivered with no
status (the receiver then checks it at once rather than trust either).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.lowlevel import checkpoint

from chit.tasks import wire

log = logging.getLogger(__name__)

NOTE_MARK = b'"notifications/tasks'
"""Every task notification's line holds this (``in`` on bytes is cheap: most lines are
replies and never get parsed twice)."""

_METHODS = frozenset({wire.NOTIFICATION_TASKS, wire.NOTIFICATION_TASK_STATUS})
_FINAL = frozenset({"completed", "failed", "cancelled"})

BURST = 64
"""Notifications delivered before the queue lets the loop read again."""

Deliver = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Receives (task id, the notification's params)."""


def task_note(line: bytes) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """``(task id, params, message)`` if ``line`` is a task status notification, else None.

    Anything else - a reply, another notification, a malformed frame - is left to the
    session's own path, which judges it as the SDK does.
    """
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "id" in msg:
        return None
    if msg.get("method") not in _METHODS:
        return None
    params = msg.get("params")
    if not isinstance(params, dict):
        return None
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        return None
    return task_id, params, msg


class HintQueue:
    """Pending task notifications, newest per task, delivered by :meth:`run`."""

    def __init__(self, deliver: Deliver) -> None:
        """Hand every notification to ``deliver`` (awaited, one at a time)."""
        self._deliver = deliver
        self._pending: dict[str, dict[str, Any]] = {}
        self._wake = anyio.Event()
        self.offered = 0
        self.coalesced = 0

    def __len__(self) -> int:
        """Tasks with a notification not delivered yet."""
        return len(self._pending)

    def offer(self, task_id: str, params: dict[str, Any]) -> None:
        """Queue ``params`` for ``task_id`` (replacing an undelivered one); never blocks.

        Called by the pipes' reader, outside any task.
        """
        self.offered += 1
        older = self._pending.get(task_id)
        if older is not None:
            self.coalesced += 1
            status = params.get("status")
            if older.get("status") != status and status not in _FINAL:
                # It moved through another status meanwhile (an input request that was
                # answered, say): say nothing of its status, so it is checked at once.
                params = {**params, "status": None}
        self._pending[task_id] = params
        self._wake.set()

    async def run(self) -> None:
        """Deliver pending notifications, oldest first, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            done = 0
            while self._pending:
                task_id = next(iter(self._pending))
                params = self._pending.pop(task_id)
                try:
                    await self._deliver(task_id, params)
                except Exception:  # one bad delivery must not stop the others
                    log.exception("task notification handler raised")
                done += 1
                if done % BURST == 0:
                    await checkpoint()  # replies waiting behind a burst get read


__all__ = ["NOTE_MARK", "HintQueue", "task_note"]
