"""2025-11-25 core tasks over an ``mcp`` 2.3 ``ClientSession``.

The SDK has no task runtime for this generation. Two facts shape this module:

* A task-augmented ``tools/call`` answers with a *nested* ``CreateTaskResult``
  (``{"task": {...}}``), which fails the SDK's ``CallToolResult`` validation in both
  ``call_tool`` and ``send_request``. So the create goes through the session's private
  raw dispatcher (``_stamp`` + ``_dispatcher.send_raw_request``), the documented
  workaround (``notes/mcp-tasks.md`` §4.4). It is isolated in :func:`_send_raw`.
* ``tasks/*`` are unknown to the SDK's method tables, so ``send_request`` skips result
  validation for them and we parse the raw dict strictly ourselves.

On a stdio server served on the event loop (``pipes``), ``tasks/get`` and ``tasks/result``
go out as JSON on its pipes (:meth:`ServerPipes.request`) and their answers settle a
future straight from the pipe reader: through the SDK each one built and validated a
request model, took the dispatcher's task and stream hops, and validated the reply into
a model only to dump it back to a dict — the client's CPU between a 2025 task's end
reaching it and the ``tasks/result`` that end implies coming back (the notification →
store path), and of every poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from chit.tasks.client.pipes import ServerPipes

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


async def _ask(
    session: ClientSession,
    pipes: ServerPipes | None,
    method: str,
    task_id: str,
    timeout: float | None,
) -> dict[str, Any]:
    """Send ``tasks/get`` or ``tasks/result`` for ``task_id``; the reply object, unparsed.

    On ``pipes`` (see the module docstring) the request id comes from the session's own
    counter, so it never meets one of the session's requests. ``timeout`` None waits the
    session's read timeout, as the SDK does.
    """
    if pipes is None:
        request = GetTaskRequest if method == wire.TASKS_GET else TaskResultRequest
        return await send(session, request(params=task_id_params(task_id)), timeout)
    if timeout is None:
        timeout = session._session_read_timeout_seconds or 30.0
    return await pipes.request(_request_id(session), method, {"taskId": task_id}, timeout)


def _request_id(session: ClientSession) -> int:
    """A request id of the session's own counter (private SDK members, as ``_send_raw``)."""
    dispatcher: Any = session._dispatcher
    request_id: int = dispatcher._allocate_id()
    while request_id in dispatcher._pending:
        request_id = dispatcher._allocate_id()
    return request_id


async def get(
    session: ClientSession, task_id: str, pipes: ServerPipes | None = None
) -> TaskSnapshot:
    """``tasks/get`` → snapshot (sent on ``pipes`` when given)."""
    try:
        raw = await _ask(session, pipes, wire.TASKS_GET, task_id, None)
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


async def result(
    session: ClientSession, task_id: str, timeout: float, pipes: ServerPipes | None = None
) -> TaskOutcome:
    """Blocking ``tasks/result``: what the original ``tools/call`` would have returned
    (sent on ``pipes`` when given).

    A JSON-RPC error that is the *task's* outcome (the tool call failed at protocol
    level, or the server has no result for a cancelled task) is returned as a
    :class:`TaskOutcome` with ``error`` once ``tasks/get`` confirms the task is terminal;
    transport, lost and incompatible failures are raised.
    """
    method = wire.TASKS_RESULT
    try:
        raw = await _ask(session, pipes, method, task_id, timeout)
    except MCPError as exc:
        err = classify(exc, method)
        if err.failure_class != "permanent":
            raise err from exc
        snap = await get(session, task_id, pipes)
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
