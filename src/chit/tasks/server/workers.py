"""Task workers: run a tool for a task and record its outcome."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.exceptions import MCPError

from chit.tasks.server.backend import StoreUnavailable
from chit.tasks.server.context import TaskContext
from chit.tasks.server.errors import task_ref
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.tools import (
    TaskGone,
    TaskProtocolError,
    TaskTool,
    tool_error_result,
)
from chit.tasks.wire import INTERNAL_ERROR, PROTOCOL_2025

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime

logger = logging.getLogger(__name__)


async def run_task(runtime: TaskRuntime, task_id: str) -> None:
    """Run one task's tool to its end, recording the outcome (the worker body)."""
    record = runtime.store.get(task_id)
    if record is None:
        return
    tool = runtime.tools[record.tool]
    ctx = TaskContext(runtime, task_id, tool.name)
    with anyio.CancelScope() as scope:
        runtime.scopes[task_id] = scope
        try:
            await _execute(runtime, record, tool, ctx)
        finally:
            runtime.scopes.pop(task_id, None)
    await runtime.write(runtime.store.update, task_id, runs=record.runs + 1, durable=False)


async def _execute(
    runtime: TaskRuntime, record: TaskRecord, tool: TaskTool, ctx: TaskContext
) -> None:
    await runtime._set(record.id, status_message="Running", durable=False)
    try:
        if tool.pre_inputs:
            asks: dict[str, Ask] = {p.key: (p.message, p.schema) for p in tool.pre_inputs}
            ctx.gathered = await runtime.request_inputs(record.id, asks)
        kwargs = dict(record.args)
        if tool.context_param:
            kwargs[tool.context_param] = ctx
        value = await tool.fn(**kwargs)
    except TaskProtocolError as exc:
        await _finish(runtime, record, error=exc.to_error(), message=f"Failed: {exc.message}")
    except MCPError as exc:
        error = exc.error.model_dump(mode="json", exclude_none=True)
        await _finish(runtime, record, error=error, message=f"Failed: {exc.error.message}")
    except TaskGone:
        return
    except StoreUnavailable as exc:
        # The store went away under the tool (a read while parked, say): record a failure
        # once it is back rather than mistaking the outage for the tool's own error.
        error = {"code": INTERNAL_ERROR, "message": exc.message}
        await _finish(
            runtime, record, error=error, message="Failed: the task store was unavailable"
        )
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        # The message goes to the client in the tool's error result; the log names only
        # the exception's type. A tool may put anything in a message, its own task id
        # included, and the runtime's logs never name a task id (see ``task_ref``).
        logger.info("%s: tool %s raised %s", task_ref(record.id), tool.name, type(exc).__name__)
        await _finish(runtime, record, result=tool_error_result(str(exc) or type(exc).__name__))
    else:
        await _finish(runtime, record, result=tool.to_result(value))


async def _finish(
    runtime: TaskRuntime,
    record: TaskRecord,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    message: str | None = None,
) -> None:
    if error is not None:
        await runtime._set(record.id, status="failed", error=error, status_message=message)
        return
    assert result is not None
    is_error = bool(result.get("isError"))
    # 2025: a tool error fails the task; 2026 reserves failed for JSON-RPC errors.
    status = "failed" if is_error and record.protocol == PROTOCOL_2025 else "completed"
    text = "Completed with a tool error" if is_error else "Completed"
    await runtime._set(record.id, status=status, result=result, status_message=text)


Ask = tuple[str, dict[str, Any]] | dict[str, Any]
"""One input request: ``(message, schema)`` of an elicitation form, or a whole request
object ``{"method", "params"}`` (``sampling/createMessage``, ``roots/list``)."""


async def park_for_inputs(
    runtime: TaskRuntime, task_id: str, requests: dict[str, Ask]
) -> dict[str, dict[str, Any]]:
    """Park the task in ``input_required`` until every key in ``requests`` is answered.

    Polls the shared row (woken early by local changes), so answers stored by another
    process sharing the task store reach the worker too.
    """
    record = runtime.store.get(task_id)
    if record is None:
        raise TaskGone(task_id)
    answers = {k: v for k, v in record.input_responses.items() if k in requests}
    missing = {k: v for k, v in requests.items() if k not in answers}
    if missing:
        new = dict(record.input_requests)
        for key, ask in missing.items():
            new[key] = _request(ask)
        await runtime._set(
            task_id,
            status="input_required",
            input_requests=new,
            status_message=_waiting(missing),
        )
    while True:
        record = runtime.store.get(task_id)
        if record is None or record.status not in ("working", "input_required"):
            raise TaskGone(task_id)
        if all(k in record.input_responses for k in requests):
            break
        await runtime.wait_change(task_id)
    if record.status == "input_required" and not record.pending_inputs:
        await runtime._set(task_id, status="working", status_message="Input received; resuming")
    return {k: record.input_responses[k] for k in requests}


def _request(ask: Ask) -> dict[str, Any]:
    if isinstance(ask, dict):
        return ask
    message, schema = ask
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def _waiting(requests: dict[str, Ask]) -> str:
    if len(requests) == 1:
        ask = next(iter(requests.values()))
        if isinstance(ask, dict):
            return f"Waiting for the client: {ask.get('method', 'a request')}"
        return f"Waiting for input: {ask[0]}"
    return f"Waiting for {len(requests)} answers"
