"""Server side of MCP tasks, both generations, over a persistent store (SQLite or PostgreSQL).

Typical assembly::

    runtime = TaskRuntime("tasks.db")

    @runtime.task_tool("slow_compute")
    async def slow_compute(seconds: float, task: TaskContext) -> str: ...

    server = build_server("demo", runtime)   # an mcp MCPServer
    server.run("stdio")                      # or chit.tasks.server.stdio.run_stdio(server)

See ``docs/tasks-server.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from chit.tasks.server.backend import StoreUnavailable, TaskBackend, open_task_store
from chit.tasks.server.context import TaskContext
from chit.tasks.server.ext2026 import TasksExtension
from chit.tasks.server.http import TaskNameHeaderGuard
from chit.tasks.server.legacy2025 import legacy_middleware
from chit.tasks.server.pgstore import PostgresTaskStore
from chit.tasks.server.principal import PrincipalOf, default_principal
from chit.tasks.server.runtime import TaskError, TaskRuntime
from chit.tasks.server.store import TaskRecord, TaskStore
from chit.tasks.server.tools import PreInput, TaskProtocolError, TaskToolError


def build_server(
    name: str,
    runtime: TaskRuntime,
    *,
    principal_of: PrincipalOf = default_principal,
    extensions: Sequence[Any] = (),
    **kwargs: Any,
) -> Any:
    """Return an ``MCPServer`` serving ``runtime``'s task tools in both generations.

    The runtime's workers run in the server lifespan; extra ``kwargs`` go to
    ``MCPServer`` (its own ``lifespan`` is not supported here).
    """
    from mcp.server.mcpserver import MCPServer

    ext = TasksExtension(runtime, principal_of)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        async with runtime.running():
            yield {}

    server = MCPServer(name, extensions=[ext, *extensions], lifespan=lifespan, **kwargs)
    server.middleware.append(legacy_middleware(ext))
    # Replace the SDK's listen handler with one that also serves task subscriptions.
    from mcp_types import SubscriptionsListenRequestParams

    from chit.tasks.server.listen import TaskListenHandler

    listen = TaskListenHandler(server._subscriptions, ext)
    server._lowlevel_server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, listen
    )
    return server


__all__ = [
    "PostgresTaskStore",
    "PreInput",
    "PrincipalOf",
    "StoreUnavailable",
    "TaskBackend",
    "TaskContext",
    "TaskError",
    "TaskNameHeaderGuard",
    "TaskProtocolError",
    "TaskRecord",
    "TaskRuntime",
    "TaskStore",
    "TaskToolError",
    "TasksExtension",
    "build_server",
    "default_principal",
    "legacy_middleware",
    "open_task_store",
]
