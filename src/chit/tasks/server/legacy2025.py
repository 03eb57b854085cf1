"""2025-11-25 core tasks on the same server: middleware plus ``tasks/*`` handlers.

The middleware (:func:`legacy_middleware`) does what an ``Extension`` cannot at
2025-11-25: it adds ``capabilities.tasks`` to the ``initialize`` result and
``execution.taskSupport`` to ``tools/list``, and it answers a task-augmented
``tools/call`` (``params.task``) itself, because the SDK would reject the nested
``CreateTaskResult`` as an invalid ``CallToolResult``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from chit.tasks.server.asking import ask_on_result
from chit.tasks.server.render import create_result_2025, task_2025
from chit.tasks.server.tools import refuse_undeclared
from chit.tasks.wire import (
    INVALID_PARAMS,
    META_REQUEST_KEY,
    METHOD_NOT_FOUND,
    PROTOCOL_2025,
    ListTasksParams,
    TaskIdParams,
    is_terminal,
    related_task_meta,
)

if TYPE_CHECKING:
    from chit.tasks.server.ext2026 import TasksExtension
    from chit.tasks.server.runtime import TaskRuntime

Ctx = ServerRequestContext[Any, Any]
PAGE_SIZE = 50

TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def legacy_middleware(ext: TasksExtension) -> ServerMiddleware[Any]:
    """Return the 2025-11-25 middleware for the server carrying ``ext``."""
    runtime = ext.runtime

    async def middleware(ctx: Ctx, call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return _advertise(await call_next(ctx))
        if ctx.protocol_version != PROTOCOL_2025:
            return await call_next(ctx)
        if ctx.method == "tools/list":
            return _annotate_tools(runtime, await call_next(ctx))
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            created = await _maybe_create(ext, ctx, ctx.params)
            if created is not None:
                return created
        return await call_next(ctx)

    return middleware


def _advertise(result: HandlerResult) -> HandlerResult:
    """Add ``capabilities.tasks`` when the handshake settled on 2025-11-25."""
    data = _as_dict(result)
    if data.get("protocolVersion") != PROTOCOL_2025:
        return result
    data.setdefault("capabilities", {})["tasks"] = TASKS_CAPABILITY
    return data


def _annotate_tools(runtime: TaskRuntime, result: HandlerResult) -> HandlerResult:
    data = _as_dict(result)
    for tool in data.get("tools", []):
        task_tool = runtime.tools.get(tool.get("name"))
        if task_tool is not None:
            tool["execution"] = {"taskSupport": task_tool.task_support}
    return data


async def _maybe_create(
    ext: TasksExtension, ctx: Ctx, params: dict[str, Any]
) -> dict[str, Any] | None:
    """Create a task for ``params.task`` calls; enforce ``taskSupport`` (-32601)."""
    name = params.get("name")
    tool = ext.runtime.tools.get(name) if isinstance(name, str) else None
    task = params.get("task")
    if task is None:
        if tool is not None and tool.task_support == "required":
            raise MCPError(
                code=METHOD_NOT_FOUND, message=f"Tool {name!r} requires task-augmented execution"
            )
        return None
    if tool is None:
        raise MCPError(
            code=METHOD_NOT_FOUND,
            message=f"Tool {name!r} does not support task-augmented execution",
        )
    refuse_undeclared(tool, ctx.session.client_capabilities)
    meta = params.get("_meta") or {}
    ttl = task.get("ttl") if isinstance(task, dict) else None
    key = meta.get(META_REQUEST_KEY)
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 256):
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{META_REQUEST_KEY} must be a string of 1 to 256 characters",
        )
    record = await ext.runtime.create(
        tool,
        params.get("arguments"),
        principal=ext.principal_of(ctx),
        protocol=PROTOCOL_2025,
        ttl_ms=ttl if isinstance(ttl, int) else None,
        request_key=key,
        progress_token=meta.get("progressToken"),
        session=ctx.session,
    )
    return create_result_2025(record, immediate=f"Started {tool.name} as a background task.")


async def get(ext: TasksExtension, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """``tasks/get`` (2025): the Task at top level."""
    _require_2025(ctx, "tasks/get")
    return task_2025(ext.runtime.visible(params.task_id, ext.principal_of(ctx))).wire()


async def cancel(ext: TasksExtension, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """``tasks/cancel`` (2025): the Task, already ``cancelled``; -32602 if terminal."""
    _require_2025(ctx, "tasks/cancel")
    record = ext.runtime.visible(params.task_id, ext.principal_of(ctx))
    if is_terminal(record.status) or not await ext.runtime.cancel(record.id):
        current = ext.runtime.store.get(record.id)
        status = current.status if current else record.status
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Cannot cancel task: already in terminal status {status!r}",
        )
    return task_2025(ext.runtime.visible(record.id, ext.principal_of(ctx))).wire()


async def list_tasks(ext: TasksExtension, ctx: Ctx, params: ListTasksParams) -> HandlerResult:
    """``tasks/list`` (2025): the caller's visible tasks, oldest first, paginated."""
    _require_2025(ctx, "tasks/list")
    after: tuple[int, str] | None = None
    if params.cursor:
        try:
            created, _, task_id = params.cursor.partition(":")
            after = (int(created), task_id)
        except ValueError as exc:
            raise MCPError(code=INVALID_PARAMS, message="Invalid cursor") from exc
    now = ext.runtime.now_ms()
    records = ext.runtime.store.list_for(ext.principal_of(ctx), now, after, PAGE_SIZE + 1)
    page = records[:PAGE_SIZE]
    result: dict[str, Any] = {"tasks": [task_2025(r).wire() for r in page]}
    if len(records) > PAGE_SIZE:
        last = page[-1]
        result["nextCursor"] = f"{last.created_at_ms}:{last.id}"
    return result


async def result(ext: TasksExtension, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """``tasks/result`` (2025): block until terminal, delivering input requests meanwhile.

    Pending input requests are sent on this request's stream (``elicitation/create``,
    ``sampling/createMessage``, ``roots/list``), tagged with related-task ``_meta``;
    answers go to the runtime like ``tasks/update`` (:mod:`~chit.tasks.server.asking`).
    """
    _require_2025(ctx, "tasks/result")
    runtime = ext.runtime
    principal = ext.principal_of(ctx)
    record = runtime.visible(params.task_id, principal)
    in_flight: set[str] = set()
    async with anyio.create_task_group() as tg:
        while not is_terminal(record.status):
            for key, request in record.pending_inputs.items():
                if key not in in_flight:
                    in_flight.add(key)
                    tg.start_soon(ask_on_result, runtime, ctx, record.id, key, request, in_flight)
            await runtime.wait_change(record.id)
            record = runtime.visible(record.id, principal)
        tg.cancel_scope.cancel()
    meta = related_task_meta(record.id)
    if record.status == "cancelled":
        raise MCPError(code=INVALID_PARAMS, message="Task was cancelled; it has no result")
    if record.error is not None:
        raise MCPError(
            code=record.error["code"],
            message=record.error["message"],
            data=record.error.get("data"),
        )
    payload = dict(record.result or {"content": []})
    payload["_meta"] = {**(payload.get("_meta") or {}), **meta}
    return payload


def _require_2025(ctx: Ctx, method: str) -> None:
    # Versions before 2025-11-25 have no tasks at all.
    if ctx.protocol_version != PROTOCOL_2025:
        raise MCPError(code=METHOD_NOT_FOUND, message=f"Method not found: {method}")


def _as_dict(result: HandlerResult) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        data: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return data
    return dict(result or {})
