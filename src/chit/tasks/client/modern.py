"""2026-07-28 tasks extension (SEP-2663) over an ``mcp`` 2.3 ``ClientSession``.

Create uses the SDK's public claim path: the client declares the extension with a
``ResultClaim`` for ``resultType: "task"``, and ``session.call_tool(...,
allow_claimed=True)`` returns the flat ``CreateTaskResult`` instead of resolving it.
A multi-round-trip ``InputRequiredResult`` *before* task creation is resolved here,
synchronously, through the caller's input handler (the spec says servers SHOULD do that
exchange before returning the task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from mcp.client.session import ClientSession
from mcp_types import (
    CallToolResult,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    RequestParamsMeta,
)

from chit.tasks import wire
from chit.tasks.client.errors import PermanentError, ProtocolViolation, classify
from chit.tasks.client.models import TaskHandle, TaskSnapshot
from chit.tasks.client.parse import parse_create_2026, parse_detailed_2026
from chit.tasks.client.requests import (
    CancelTaskRequest,
    ClaimedTaskResult,
    GetTaskRequest,
    UpdateTaskRequest,
    send,
    task_id_params,
)

TOOLS_CALL = "tools/call"
MAX_MRTR_ROUNDS = 10
"""Same cap as the SDK's own multi-round-trip driver."""

PreTaskInput = Callable[[str, InputRequest], Awaitable[InputResponse | ErrorData]]
"""Answers one pre-creation input request (key, request)."""


async def create(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any],
    timeout: float,
    pre_task_input: PreTaskInput,
) -> TaskHandle | CallToolResult:
    """Send ``tools/call``; the server decides whether it becomes a task."""
    responses: dict[str, InputResponse] | None = None
    state: str | None = None
    for _ in range(MAX_MRTR_ROUNDS + 1):
        try:
            reply = await session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=timeout,
                input_responses=responses,
                request_state=state,
                meta=cast(RequestParamsMeta, meta),  # an open TypedDict: any key is allowed
                allow_input_required=True,
                allow_claimed=True,
            )
        except Exception as exc:
            raise classify(exc, TOOLS_CALL) from exc
        if isinstance(reply, ClaimedTaskResult):
            return parse_create_2026(reply.model_dump(by_alias=True, mode="json"), TOOLS_CALL)
        if isinstance(reply, CallToolResult):
            return reply
        if not isinstance(reply, InputRequiredResult):
            raise ProtocolViolation("unexpected claimed result", method=TOOLS_CALL)
        responses = {}
        for key, request in (reply.input_requests or {}).items():
            answer = await pre_task_input(key, request)
            if isinstance(answer, ErrorData):
                raise PermanentError(
                    f"input declined: {answer.message}", method=TOOLS_CALL, code=answer.code
                )
            responses[key] = answer
        state = reply.request_state
    raise PermanentError("too many input rounds before task creation", method=TOOLS_CALL)


async def get(
    session: ClientSession, task_id: str, seen: frozenset[str] = frozenset()
) -> TaskSnapshot:
    """``tasks/get`` → detailed snapshot (inline result / error / inputRequests)."""
    try:
        raw = await send(session, GetTaskRequest(params=task_id_params(task_id)))
    except Exception as exc:
        raise classify(exc, wire.TASKS_GET) from exc
    return parse_detailed_2026(raw, wire.TASKS_GET, task_id, seen=seen)


async def update(
    session: ClientSession, task_id: str, responses: Mapping[str, InputResponse]
) -> None:
    """``tasks/update`` with ``inputResponses`` (partial sets allowed); ack only."""
    payload = {
        key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, value in responses.items()
    }
    params = wire.UpdateTaskParams(task_id=task_id, input_responses=payload)
    try:
        await send(session, UpdateTaskRequest(params=params))
    except Exception as exc:
        raise classify(exc, wire.TASKS_UPDATE) from exc


async def cancel(session: ClientSession, task_id: str) -> None:
    """``tasks/cancel``: an ack only; the task may still finish as ``completed``."""
    try:
        await send(session, CancelTaskRequest(params=task_id_params(task_id)))
    except Exception as exc:
        raise classify(exc, wire.TASKS_CANCEL) from exc


__all__ = ["MAX_MRTR_ROUNDS", "PreTaskInput", "cancel", "create", "get", "update"]
