"""The ``io.modelcontextprotocol/tasks`` extension (protocol 2026-07-28), plus method routing.

:class:`TasksExtension` is an ``mcp`` server ``Extension``: it intercepts ``tools/call``
for task tools and serves ``tasks/*``. One handler per method serves *both*
generations, because the SDK allows one registration per method name; the handler
routes on the request's negotiated protocol version (2025-11-25 → ``legacy2025``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
)
from pydantic import BaseModel

from chit.tasks.server import legacy2025
from chit.tasks.server.context import TaskContext
from chit.tasks.server.principal import PrincipalOf, default_principal
from chit.tasks.server.render import create_result_2026, detailed_2026
from chit.tasks.server.runtime import TaskRuntime
from chit.tasks.server.tools import (
    TaskProtocolError,
    TaskTool,
    TaskToolError,
    refuse_undeclared,
)
from chit.tasks.wire import (
    EXTENSION_ID,
    META_REQUEST_KEY,
    METHOD_NOT_FOUND,
    PROTOCOL_2026,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_LIST,
    TASKS_RESULT,
    TASKS_UPDATE,
    AckResult2026,
    ListTasksParams,
    TaskIdParams,
    UpdateTaskParams,
)

Ctx = ServerRequestContext[Any, Any]


def is_modern(ctx: Ctx) -> bool:
    """True when the request speaks 2026-07-28 or later (date strings sort)."""
    return (ctx.protocol_version or "") >= PROTOCOL_2026


def method_not_found(method: str) -> MCPError:
    """Return the -32601 error for a method absent at the negotiated version."""
    return MCPError(code=METHOD_NOT_FOUND, message=f"Method not found: {method}")


class TasksExtension(Extension):
    """Serves tasks for both generations on one ``MCPServer``."""

    identifier = EXTENSION_ID

    def __init__(self, runtime: TaskRuntime, principal_of: PrincipalOf = default_principal) -> None:
        """Serve ``runtime``'s task tools; ``principal_of`` binds tasks to callers."""
        self.runtime = runtime
        self.principal_of = principal_of

    # --- contributions ----------------------------------------------------------------

    def tools(self) -> Sequence[ToolBinding]:
        """List every task tool on the server (its synchronous form, for plain calls)."""
        return [
            ToolBinding(
                fn=_sync_wrapper(self.runtime, tool),
                kwargs={"name": tool.name, "description": tool.description},
            )
            for tool in self.runtime.tools.values()
        ]

    def methods(self) -> Sequence[MethodBinding]:
        """Bind ``tasks/*`` for every version; each handler routes by version."""
        return [
            MethodBinding(TASKS_GET, TaskIdParams, self._get),
            MethodBinding(TASKS_CANCEL, TaskIdParams, self._cancel),
            MethodBinding(TASKS_UPDATE, UpdateTaskParams, self._update),
            MethodBinding(TASKS_RESULT, TaskIdParams, self._result),
            MethodBinding(TASKS_LIST, ListTasksParams, self._list),
        ]

    # --- tools/call ---------------------------------------------------------------------

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: Ctx, call_next: CallNext
    ) -> HandlerResult:
        """Turn calls of task tools into tasks when the caller declared the extension."""
        tool = self.runtime.tools.get(params.name)
        if tool is None or not is_modern(ctx):
            # 2025 task creation happened in the legacy middleware; plain calls run sync.
            return await call_next(ctx)
        capabilities = ctx.session.client_capabilities
        declared = bool(
            capabilities and capabilities.extensions and EXTENSION_ID in capabilities.extensions
        )
        if not declared:
            if tool.task_support == "required":
                require_client_extension(ctx, EXTENSION_ID)
            return await call_next(ctx)
        refuse_undeclared(tool, capabilities)
        gathered: dict[str, dict[str, Any]] = {}
        if tool.pre_inputs:
            answers = params.input_responses or {}
            missing = [p for p in tool.pre_inputs if p.key not in answers]
            if missing:
                # MRTR (SEP-2322): resolve pre-task input synchronously, then create the task.
                return InputRequiredResult(
                    input_requests={
                        p.key: ElicitRequest(
                            params=ElicitRequestFormParams(
                                message=p.message, requested_schema=p.schema
                            )
                        )
                        for p in missing
                    }
                )
            gathered = {p.key: _dump(answers[p.key]) for p in tool.pre_inputs}
        meta = params.meta or {}
        record = await self.runtime.create(
            tool,
            params.arguments,
            principal=self.principal_of(ctx),
            protocol=PROTOCOL_2026,
            request_key=_request_key(meta),
            gathered=gathered,
        )
        return create_result_2026(record)

    # --- tasks/* ------------------------------------------------------------------------

    async def _get(self, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
        if not is_modern(ctx):
            return await legacy2025.get(self, ctx, params)
        require_client_extension(ctx, EXTENSION_ID)
        record = self.runtime.visible(params.task_id, self.principal_of(ctx))
        return detailed_2026(record).wire()

    async def _update(self, ctx: Ctx, params: UpdateTaskParams) -> HandlerResult:
        if not is_modern(ctx):
            raise method_not_found(TASKS_UPDATE)
        require_client_extension(ctx, EXTENSION_ID)
        record = self.runtime.visible(params.task_id, self.principal_of(ctx))
        await self.runtime.answer(record.id, params.input_responses)
        return AckResult2026().wire()

    async def _cancel(self, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
        if not is_modern(ctx):
            return await legacy2025.cancel(self, ctx, params)
        require_client_extension(ctx, EXTENSION_ID)
        record = self.runtime.visible(params.task_id, self.principal_of(ctx))
        await self.runtime.cancel(record.id)  # idempotent: terminal tasks are left as they are
        return AckResult2026().wire()

    async def _result(self, ctx: Ctx, params: TaskIdParams) -> HandlerResult:
        if is_modern(ctx):
            raise method_not_found(TASKS_RESULT)
        return await legacy2025.result(self, ctx, params)

    async def _list(self, ctx: Ctx, params: ListTasksParams) -> HandlerResult:
        if is_modern(ctx):
            raise method_not_found(TASKS_LIST)
        return await legacy2025.list_tasks(self, ctx, params)


def _request_key(meta: Any) -> str | None:
    value = meta.get(META_REQUEST_KEY) if isinstance(meta, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 256:
        raise MCPError(
            code=-32602, message=f"{META_REQUEST_KEY} must be a string of 1 to 256 characters"
        )
    return value


def _dump(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        data: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
        return data
    return dict(value)


class SyncContext(TaskContext):
    """The ``TaskContext`` of a task tool called *without* a task (plain ``tools/call``)."""

    def __init__(self, tool: str) -> None:
        """No task, no store: status updates are dropped, input cannot be parked."""
        self.task_id = ""
        self.tool = tool
        self.gathered = {}

    @property
    def cancelled(self) -> bool:
        """Never: a plain call is cancelled through ``notifications/cancelled``."""
        return False

    async def set_status(self, message: str) -> None:
        """Drop the message (there is no task to show it on)."""

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Drop progress (plain calls have no task to report on)."""

    async def request_inputs(
        self, requests: dict[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        """Refuse: waiting for input needs a task."""
        raise TaskToolError("This tool needs input from the user; call it as a task")

    async def _ask_one(self, key: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """Refuse: a sampling or roots question inside a task needs a task."""
        raise TaskToolError("This tool asks the client inside a task; call it as a task")


def _sync_wrapper(runtime: TaskRuntime, tool: TaskTool) -> Callable[..., Awaitable[Any]]:
    """Return a plain MCP tool function running ``tool`` without a task."""
    signature = inspect.signature(tool.fn)
    params = [p for name, p in signature.parameters.items() if name != tool.context_param]
    hints = dict(inspect.get_annotations(tool.fn, eval_str=True))
    hints.pop(tool.context_param or "", None)

    @functools.wraps(tool.fn)
    async def run(**kwargs: Any) -> Any:
        if tool.context_param:
            kwargs[tool.context_param] = SyncContext(tool.name)
        try:
            return await tool.fn(**kwargs)
        except TaskProtocolError as exc:
            raise MCPError(code=exc.code, message=exc.message, data=exc.data) from exc

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = hints
    del run.__wrapped__  # keep inspect off the original signature
    return run
