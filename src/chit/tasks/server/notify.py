"""Best-effort push for 2025 tasks: ``notifications/tasks/status`` and progress.

Requestors MUST NOT rely on these (polling is the source of truth), so every send is
fire-and-forget: a closed session only drops the notification. The creating request's
session is remembered in memory only; after a restart nobody is notified, which the
spec allows.

Sends go through one queue drained by :meth:`Notifier.run`, in order, instead of being
awaited by whoever changed the task: a ``tasks/cancel`` reply must not wait behind a
notification to a slow (or stuck) client stream. The status is read when the
notification is sent, so a burst of changes may coalesce into the latest state.
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

from chit.tasks.wire import PROTOCOL_2025, related_task_meta

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime

logger = logging.getLogger(__name__)
QUEUE_SIZE = 1024
SEND_TIMEOUT_S = 5.0


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
        self._send, self._queue = anyio.create_memory_object_stream[tuple[str, Any]](QUEUE_SIZE)

    async def run(self) -> None:
        """Send queued notifications until cancelled (runs in the runtime's task group)."""
        async for kind, item in self._queue:
            if kind == "status":
                await self._send_status(item)
            else:
                binding, notification = item
                await self._deliver(binding, notification)

    def _enqueue(self, kind: str, item: Any) -> None:
        try:
            self._send.send_nowait((kind, item))
        except anyio.WouldBlock:  # a client that far behind loses hints, not state
            logger.debug("task notification queue full; dropped %s", kind)

    def bind(self, task_id: str, session: Any, progress_token: str | int | None) -> None:
        """Remember the creating session (``None``: nothing to notify)."""
        if session is not None:
            self._bindings[task_id] = _Binding(session, progress_token)

    async def status_changed(self, task_id: str) -> None:
        """Queue ``notifications/tasks/status`` for a 2025 task (no related-task meta)."""
        if task_id in self._bindings:
            self._enqueue("status", task_id)

    async def _send_status(self, task_id: str) -> None:
        binding = self._bindings.get(task_id)
        record = self._runtime.store.get(task_id)
        if binding is None or record is None or record.protocol != PROTOCOL_2025:
            return
        from chit.tasks.server.render import task_2025

        params = TaskStatusNotificationParams.model_validate(task_2025(record).wire())
        await self._deliver(binding, TaskStatusNotification(params=params))
        if record.status in ("completed", "failed", "cancelled"):
            self._bindings.pop(task_id, None)

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
        self._enqueue("progress", (binding, ProgressNotification(params=params)))

    async def _deliver(self, binding: _Binding, notification: Any) -> None:
        try:
            # Bounded: one stuck session must not hold back the others' notifications.
            with anyio.fail_after(SEND_TIMEOUT_S):
                await binding.session.send_notification(notification)
        except Exception as exc:  # the client went away or stalls: polling still works
            logger.debug("dropped task notification: %r", exc)
