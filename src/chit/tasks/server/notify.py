"""Best-effort push for 2025 tasks: ``notifications/tasks/status`` and progress.

Requestors MUST NOT rely on these (polling is the source of truth), so every send is
fire-and-forget: a closed session only drops the notification. The creating request's
session is remembered in memory only; after a restart nobody is notified, which the
spec allows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

    def bind(self, task_id: str, session: Any, progress_token: str | int | None) -> None:
        """Remember the creating session (``None``: nothing to notify)."""
        if session is not None:
            self._bindings[task_id] = _Binding(session, progress_token)

    async def status_changed(self, task_id: str) -> None:
        """Send ``notifications/tasks/status`` for a 2025 task (no related-task meta)."""
        binding = self._bindings.get(task_id)
        record = self._runtime.store.get(task_id)
        if binding is None or record is None or record.protocol != PROTOCOL_2025:
            return
        from chit.tasks.server.render import task_2025

        params = TaskStatusNotificationParams.model_validate(task_2025(record).wire())
        await self._send(binding, TaskStatusNotification(params=params))
        if record.status in ("completed", "failed", "cancelled"):
            self._bindings.pop(task_id, None)

    async def progress(
        self, task_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        """Send ``notifications/progress`` on the creating request's token (2025 only)."""
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
        await self._send(binding, ProgressNotification(params=params))

    async def _send(self, binding: _Binding, notification: Any) -> None:
        try:
            await binding.session.send_notification(notification)
        except Exception as exc:  # the client went away: polling still works
            logger.debug("dropped task notification: %r", exc)
