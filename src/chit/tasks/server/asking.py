"""2025-11-25: a task's input request asked on the client's open ``tasks/result``.

A parked request (``elicitation/create``, ``sampling/createMessage`` or ``roots/list``)
is sent as an ordinary server→client request tagged with related-task ``_meta``; the
client's reply is stored like a 2026 ``tasks/update`` answer, so the worker finds it
the same way whichever generation carried it.

A client that *refuses* a sampling or roots request answers with a JSON-RPC error: the
spec's ``-1`` ("user rejected sampling request") or ``-32600``. That refusal is the
answer — stored as ``{"action": "decline", "error": {...}}``, the shape a 2026 client's
decline takes — and the task goes on. Any other failure (the stream closed, the client
has no answer yet) leaves the request pending: it is asked again on the next
``tasks/result``. An elicitation is declined inside its result (``action``), so every
error on one means "ask again".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_REQUEST,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    RequestParams,
)
from pydantic import BaseModel, ValidationError

from chit.tasks.wire import related_task_meta

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime

Ctx = ServerRequestContext[Any, Any]

USER_REJECTED = -1
"""The spec's error code for a sampling request the user rejected."""

REFUSALS = frozenset({USER_REJECTED, INVALID_REQUEST})
"""Error codes that are a client's answer to a sampling or roots request (a decline)."""


def wire_request(task_id: str, request: dict[str, Any]) -> tuple[Any, type[BaseModel]]:
    """The SDK request for a stored input request, and the result model it expects.

    Raises:
        ValidationError: the stored request is not a well-formed one of its method.
    """
    params = dict(request.get("params") or {})
    meta = related_task_meta(task_id)
    method = request.get("method")
    if method == "sampling/createMessage":
        sampling = CreateMessageRequestParams.model_validate({**params, "_meta": meta})
        return CreateMessageRequest(params=sampling), CreateMessageResult
    if method == "roots/list":
        return ListRootsRequest(params=RequestParams.model_validate({"_meta": meta})), (
            ListRootsResult
        )
    form = ElicitRequestFormParams(
        message=params.get("message", ""),
        requested_schema=params.get("requestedSchema") or {"type": "object", "properties": {}},
        _meta=meta,
    )
    return ElicitRequest(params=form), ElicitResult


async def ask_on_result(
    runtime: TaskRuntime,
    ctx: Ctx,
    task_id: str,
    key: str,
    request: dict[str, Any],
    in_flight: set[str],
) -> None:
    """Ask one pending input request on ``ctx``'s ``tasks/result``; store the answer."""
    try:
        sdk_request, result_type = wire_request(task_id, request)
    except ValidationError:
        return  # a malformed stored request is never asked (it stays pending)
    elicit = result_type is ElicitResult
    try:
        answer = await ctx.session.send_request(
            sdk_request,
            result_type,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except MCPError as exc:
        if elicit or exc.error.code not in REFUSALS:
            in_flight.discard(key)  # the client may retry tasks/result; ask again then
            return
        error = {"code": exc.error.code, "message": exc.error.message}
        await runtime.answer(task_id, {key: {"action": "decline", "error": error}})
        return
    except Exception:
        in_flight.discard(key)
        return
    await runtime.answer(
        task_id, {key: answer.model_dump(by_alias=True, exclude_none=True, mode="json")}
    )
