"""Request classes for ``tasks/*`` and the 2026 claim model.

Every ``tasks/*`` request sets ``name_param = "taskId"`` so the SDK sends
``Mcp-Name: <taskId>`` on streamable HTTP (SEP-2663 routing header; harmless on 2025).
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.client.session import ClientSession
from mcp_types import Request, Result
from pydantic import BaseModel, ConfigDict

from chit.tasks import wire


class GetTaskRequest(Request[wire.TaskIdParams, Literal["tasks/get"]]):
    """``tasks/get`` (both generations)."""

    method: Literal["tasks/get"] = "tasks/get"
    params: wire.TaskIdParams
    name_param = "taskId"


class TaskResultRequest(Request[wire.TaskIdParams, Literal["tasks/result"]]):
    """``tasks/result`` (2025 only; blocks until the task is terminal)."""

    method: Literal["tasks/result"] = "tasks/result"
    params: wire.TaskIdParams
    name_param = "taskId"


class CancelTaskRequest(Request[wire.TaskIdParams, Literal["tasks/cancel"]]):
    """``tasks/cancel`` (both generations; 2025 returns the task, 2026 an ack)."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: wire.TaskIdParams
    name_param = "taskId"


class UpdateTaskRequest(Request[wire.UpdateTaskParams, Literal["tasks/update"]]):
    """``tasks/update`` (2026 only): answers to outstanding ``inputRequests``."""

    method: Literal["tasks/update"] = "tasks/update"
    params: wire.UpdateTaskParams
    name_param = "taskId"


class ClaimedTaskResult(Result):
    """The flat 2026 ``CreateTaskResult`` as the SDK's claim machinery sees it.

    Only ``result_type`` is typed; the Task fields stay extra keys so the strict parser
    in :mod:`chit.tasks.client.parse` judges them (the SDK would otherwise coerce).
    """

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"


class RawReply(BaseModel):
    """Result "model" that keeps the reply as a plain dict for our own strict parsing.

    ``send_request`` needs a pydantic model; this one accepts any JSON object (and a
    non-object reply fails validation, which we classify as a protocol violation).
    """

    model_config = ConfigDict(extra="allow")

    def body(self) -> dict[str, Any]:
        """Return the reply object as received."""
        return dict(self.model_extra or {})


async def send(
    session: ClientSession, request: Request[Any, Any], timeout: float | None = None
) -> dict[str, Any]:
    """Send a ``tasks/*`` request and return the reply object unvalidated (we parse it)."""
    reply = await session.send_request(request, RawReply, request_read_timeout_seconds=timeout)
    return reply.body()


def task_id_params(task_id: str) -> wire.TaskIdParams:
    """Build ``{taskId}`` params."""
    return wire.TaskIdParams(task_id=task_id)


__all__ = [
    "CancelTaskRequest",
    "ClaimedTaskResult",
    "GetTaskRequest",
    "RawReply",
    "TaskResultRequest",
    "UpdateTaskRequest",
    "send",
    "task_id_params",
]
