"""The ``ClientExtension`` that plugs both task generations into ``mcp.Client``.

* The ``ResultClaim`` for ``resultType: "task"`` makes the SDK accept the flat 2026
  ``CreateTaskResult`` (and advertise the extension on 2026 requests; claim-bearing
  extensions are dropped from the ad on legacy versions, where they mean nothing).
* ``NotificationBinding`` is the only SDK hook that sees ``notifications/tasks/status``
  (2025) and ``notifications/tasks`` (2026); ``message_handler`` never does. Both are
  turned into *hints* - a task id to re-poll - because notifications are never the
  source of truth.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mcp.client.extension import (
    ClaimContext,
    ClientExtension,
    NotificationBinding,
    ResultClaim,
)
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict

from chit.tasks import wire
from chit.tasks.client.requests import ClaimedTaskResult

logger = logging.getLogger(__name__)

HintHandler = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Receives (task id, raw notification params)."""


class TaskNotificationParams(BaseModel):
    """Just enough of a task notification to route it: the task id (rest kept raw)."""

    model_config = ConfigDict(extra="allow")

    taskId: str  # wire name kept verbatim: this model is only ever validated from the wire


class TasksClientExtension(ClientExtension):
    """Declares ``io.modelcontextprotocol/tasks`` and observes task notifications."""

    identifier = wire.EXTENSION_ID

    def __init__(self, on_notification: HintHandler) -> None:
        self._on_notification = on_notification

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """Claim the flat 2026 ``CreateTaskResult``."""
        return (
            ResultClaim(result_type="task", model=ClaimedTaskResult, resolve=self._no_transparent),
        )

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        """Bind both generations' status notifications."""
        return (
            NotificationBinding(
                method=wire.NOTIFICATION_TASK_STATUS,
                params_type=TaskNotificationParams,
                handler=self._deliver,
            ),
            NotificationBinding(
                method=wire.NOTIFICATION_TASKS,
                params_type=TaskNotificationParams,
                handler=self._deliver,
            ),
        )

    async def _deliver(self, params: TaskNotificationParams) -> None:
        await self._on_notification(params.taskId, params.model_dump(mode="json"))

    async def _no_transparent(self, result: ClaimedTaskResult, ctx: ClaimContext) -> CallToolResult:
        # TaskClient always sends with allow_claimed=True and records the task; a transparent
        # mcp.Client.call_tool on this client would silently hide a task from the receipts.
        raise RuntimeError("tasks are started with TaskClient.start, not Client.call_tool")


__all__ = ["HintHandler", "TaskNotificationParams", "TasksClientExtension"]
