"""Best-effort push for 2025 tasks: ``notifications/tasks/status`` and progress.

Requestors MUST NOT rely on these (polling is the source of truth), so every send is
fire-and-forget: a closed session only drops the notification. The creating request's
session is remembered in memory only; after a restart nobody is notified, which the
spec allows.

Sends go through one :class:`~chit.tasks.server.coalesce.CoalescingQueue` drained by
:meth:`Notifier.run` instead of being awaited by whoever changed the task: a
``tasks/cancel`` reply must not wait behind a notification to a slow (or stuck) client
stream. The queue keeps at most one pending status and one pending progress
notification per task (latest wins: the status is read from the row when it is sent,
a progress notification is replaced by the newer, higher one), sends status
*transitions* ahead of everything else, and throttles message-only status changes to
one per task per :data:`MESSAGE_INTERVAL_S` and :data:`MESSAGE_RATE_PER_S` in all, so a
completion never waits behind other tasks' progress chatter and a client is not woken
hundreds of times a second by messages. Progress notifications are coalesced but not
throttled per task (their token's owner asked for them); they share the budget. After a
task's terminal status is sent, no more progress goes out (progress stops when the
operation is over); progress still pending then is sent just before the end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import (
    ProgressNotification,
    ProgressNotificationParams,
    TaskStatusNotification,
    TaskStatusNotificationParams,
)

from chit.tasks.server.coalesce import CoalescingQueue
from chit.tasks.wire import PROTOCOL_2025, related_task_meta

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime

logger = logging.getLogger(__name__)
SEND_TIMEOUT_S = 5.0
MESSAGE_INTERVAL_S = 1.0
"""Least time between two message-only status notifications of one task (a status
message is for people; one per second keeps it live without flooding the stream)."""
MESSAGE_RATE_PER_S = 20.0
"""Most message-only notifications a second on one stream (or, for 2025, one process),
all tasks together: with 200 chatty tasks the per-task throttle alone lets 200 a second
through, and each one wakes the client (~3 ms of a chit client's CPU, docs/performance.md
"Task server delivery"). Past it, tasks take turns, longest-waiting first; transitions
never wait for it."""
TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class _Binding:
    session: Any
    progress_token: str | int | None


class Notifier:
    """Remembers which session created each 2025 task and pushes changes to it."""

    def __init__(self, runtime: TaskRuntime) -> None:
        """Attach to ``runtime`` (reads rows from its store)."""
        self._runtime = runtime
        self._bindings: dict[str, _Binding] = {}
        # Keys: ("status", task id) and ("progress", task id); the payload of a pending
        # progress key is in _progress (the status is read from the row when sent).
        self.queue = CoalescingQueue[tuple[str, str]](
            MESSAGE_INTERVAL_S, max_chatter_per_s=MESSAGE_RATE_PER_S
        )
        self._progress: dict[str, ProgressNotification] = {}

    async def run(self) -> None:
        """Send queued notifications until cancelled (runs in the runtime's task group)."""
        while True:
            await self.queue.wait()
            key = self.queue.pop()
            if key is None:
                continue
            kind, task_id = key
            if kind == "status":
                await self._send_status(task_id)
                continue
            binding = self._bindings.get(task_id)
            notification = self._progress.pop(task_id, None)
            if binding is not None and notification is not None:
                await self._deliver(binding, notification)

    def bind(self, task_id: str, session: Any, progress_token: str | int | None) -> None:
        """Remember the creating session (``None``: nothing to notify)."""
        if session is not None:
            self._bindings[task_id] = _Binding(session, progress_token)
            # The creation reply told the client "working": that is what it knows.
            self.queue.sent(("status", task_id), "working")

    async def status_changed(self, task_id: str, status: str | None = None) -> None:
        """Queue ``notifications/tasks/status`` for a 2025 task (no related-task meta).

        Args:
            task_id: The task that changed.
            status: Its status after the change; ``None`` if the change kept the status
                (a message-only update, sent after transitions and throttled).
        """
        self.offer(task_id, status)

    def offer(self, task_id: str, status: str | None) -> None:
        """Queue a status notification if ``task_id`` has a session here (see above)."""
        if task_id in self._bindings:
            self.queue.offer(("status", task_id), status)

    async def _send_status(self, task_id: str) -> None:
        binding = self._bindings.get(task_id)
        record = self._runtime.store.get(task_id)
        key = ("status", task_id)
        if binding is None or record is None or record.protocol != PROTOCOL_2025:
            if record is None:  # gone (expired): nothing more to say about it
                self._bindings.pop(task_id, None)
                self.queue.forget(key)
            return
        if self.queue.is_older(key, record.updated_at_ms):
            return  # never show a client an older state after a newer one
        from chit.tasks.server.render import task_2025

        params = TaskStatusNotificationParams.model_validate(task_2025(record).wire())
        self.queue.sent(key, record.status, record.updated_at_ms)
        if record.status in TERMINAL:
            # Progress the task reported before it ended goes out before the end: it may
            # still wait for the message budget, and after the end it would be dropped
            # (a tool's "finishing, 10 of 10" was lost that way).
            last = self._progress.pop(task_id, None)
            if last is not None:
                self.queue.forget(("progress", task_id))
                await self._deliver(binding, last)
        await self._deliver(binding, TaskStatusNotification(params=params))
        if record.status in TERMINAL:
            self._bindings.pop(task_id, None)
            self._progress.pop(task_id, None)
            self.queue.forget(key)
            self.queue.forget(("progress", task_id))

    async def progress(
        self, task_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        """Queue ``notifications/progress`` on the creating request's token (2025 only)."""
        binding = self._bindings.get(task_id)
        if binding is None or binding.progress_token is None:
            return
        params = ProgressNotificationParams(
            progress_token=binding.progress_token,
            progress=progress,
            total=total,
            message=message,
            _meta=related_task_meta(task_id),
        )
        # Latest wins: values strictly increase, so the newest pending one supersedes.
        self._progress[task_id] = ProgressNotification(params=params)
        self.queue.offer(("progress", task_id), None, throttle=False)

    async def _deliver(self, binding: _Binding, notification: Any) -> None:
        try:
            # Bounded: one stuck session must not hold back the others' notifications.
            with anyio.fail_after(SEND_TIMEOUT_S):
                await binding.session.send_notification(notification)
        except Exception as exc:  # the client went away or stalls: polling still works
            logger.debug("dropped task notification: %r", exc)
