"""2025-11-25 core tasks over an ``mcp`` 2.3 ``ClientSession``.

The SDK has no task runtime for this generation. Two facts shape this module:

* A task-augmented ``tools/call`` answers with a *nested* ``CreateTaskResult``
  (``{"task": {...}}``), which fails the SDK's ``CallToolResult`` validation in both
  ``call_tool`` and ``send_request``. So the create goes through the session's private
  raw dispatcher (``_stamp`` + ``_dispatcher.send_raw_request``), the documented
  workaround (``notes/mcp-tasks.md`` §4.4). It is isolated in :func:`_send_raw`.
* ``tasks/*`` are unknown to the SDK's method tables, so ``send_request`` skips result
  validation for them and we parse the raw dict strictly ourselves.
"""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError

from chit.tasks import wire
from chit.tasks.client.errors import classify
from chit.tasks.client.models import TaskHandle, TaskOutcome, TaskSnapshot
from chit.tasks.client.parse import (
    as_object,
    parse_call_result,
    parse_create_2025,
    parse_task_2025,
)
from chit.tasks.client.requests import (
    CancelTaskRequest,
    GetTaskRequest,
    TaskResultRequest,
    send,
    task_id_params,
)

TOOLS_CALL = "tools/call"


async def _send_raw(
    session: ClientSession, method: str, params: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """Send ``method`` bypassing the SDK's result validation (private SDK members)."""
    data: dict[str, Any] = {"method": method, "params": params}
    opts: CallOptions = {}
    session._stamp(data, opts)
    opts["timeout"] = timeout
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


async def create(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any],
    ttl_ms: int | None,
    timeout: float,
) -> TaskHandle | dict[str, Any]:
    """Send a task-augmented ``tools/call``.

    Returns:
        The :class:`TaskHandle`, or the raw synchronous result when the server ignored
        ``params.task`` (allowed for servers without the capability).
    """
    task = wire.TaskMetadata2025(ttl=ttl_ms).wire()
    params = {"name": tool, "arguments": arguments, "task": task, "_meta": meta}
    try:
        raw = await _send_raw(session, TOOLS_CALL, params, timeout)
    except Exception as exc:
        raise classify(exc, TOOLS_CALL) from exc
    reply = as_object(raw, TOOLS_CALL)
    if "task" in reply:
        return parse_create_2025(reply, TOOLS_CALL)
    return reply


async def get(session: ClientSession, task_id: str) -> TaskSnapshot:
    """``tasks/get`` → snapshot."""
    try:
        raw = await send(session, GetTaskRequest(params=task_id_params(task_id)))
    except Exception as exc:
        raise classify(exc, wire.TASKS_GET) from exc
    return parse_task_2025(raw, wire.TASKS_GET, task_id)


async def cancel(session: ClientSession, task_id: str) -> TaskSnapshot:
    """``tasks/cancel`` → the task as the server left it (normally ``cancelled``)."""
    try:
        raw = await send(session, CancelTaskRequest(params=task_id_params(task_id)))
    except Exception as exc:
        raise classify(exc, wire.TASKS_CANCEL) from exc
    return parse_task_2025(raw, wire.TASKS_CANCEL, task_id)


async def result(session: ClientSession, task_id: str, timeout: float) -> TaskOutcome:
    """Blocking ``tasks/result``: what the original ``tools/call`` would have returned.

    A JSON-RPC error that is the *task's* outcome (the tool call failed at protocol
    level, or the server has no result for a cancelled task) is returned as a
    :class:`TaskOutcome` with ``error`` once ``tasks/get`` confirms the task is terminal;
    transport, lost and incompatible failures are raised.
    """
    method = wire.TASKS_RESULT
    try:
        raw = await send(session, TaskResultRequest(params=task_id_params(task_id)), timeout)
    except MCPError as exc:
        err = classify(exc, method)
        if err.failure_class != "permanent":
            raise err from exc
        snap = await get(session, task_id)
        if not snap.terminal:
            raise err from exc
        error = wire.ErrorObject(code=exc.code, message=exc.message, data=exc.data)
        return TaskOutcome(status=snap.status, error=error)
    except Exception as exc:
        raise classify(exc, method) from exc
    payload = parse_call_result(raw, method)
    # 2025: a tool result with isError puts the task in "failed"; otherwise "completed".
    return TaskOutcome(status="failed" if payload.is_error else "completed", result=payload)


__all__ = ["cancel", "create", "get", "result"]
