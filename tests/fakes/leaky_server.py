"""A real MCP task server that echoes its own task ids (and secrets) in everything it says.

Built on chit's task runtime (both generations), with one tool and one middleware:

* ``leak`` writes the task id - spelled as the ``spelling`` argument says - into its
  status message, its input request (message, key, schema) and its result or error.
  Templates take ``{H}`` (the spelled id), ``{H1}``/``{H2}`` (the spelled id cut at
  ``cut``), ``{ENV}`` (the server's ``LEAK_SECRET`` environment value) and ``{AUTH}`` (the
  ``Authorization`` header of the latest HTTP request), all spelled the same way.
* every ``tasks/*`` "not found" error embeds the requested id (``Task <id> not found``,
  as the TypeScript SDK does); ``outcome="vanish"`` makes the server answer that for a
  task that still runs (as if it expired early).

Run: ``python -m tests.fakes.leaky_server stdio DB`` or ``... http DB PORT``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from chit.tasks.server import (
    TaskContext,
    TaskProtocolError,
    TaskRuntime,
    TaskToolError,
    build_server,
)
from chit.tasks.server.errors import NOT_FOUND_MESSAGE
from chit.tasks.wire import INVALID_PARAMS
from tests.leak_support import SPELLINGS

FORGOTTEN: dict[str, str] = {}
"""Task id → the "not found" message the server answers for it (``vanish``)."""

LAST_AUTH: list[str] = [""]
"""The ``Authorization`` header of the latest HTTP request (echoed as ``{AUTH}``)."""

_TASK_METHODS = {"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"}


def fill(template: str, task_id: str, spelling: str = "raw", cut: int = 0) -> str:
    """Expand a template with the task id spelled ``spelling`` (see the module doc)."""
    spell = SPELLINGS[spelling]
    cut = max(0, min(cut, len(task_id)))
    return (
        template.replace("{H1}", spell(task_id[:cut]) if cut else "")
        .replace("{H2}", spell(task_id[cut:]))
        .replace("{H}", spell(task_id))
        .replace("{ENV}", spell(os.environ.get("LEAK_SECRET", "")))
        .replace("{AUTH}", spell(LAST_AUTH[0]))
    )


def _not_found(task_id: str) -> MCPError:
    message = FORGOTTEN.get(task_id) or f"Task {task_id} not found"
    return MCPError(code=INVALID_PARAMS, message=message)


def leaky_not_found() -> Any:
    """Middleware: every ``tasks/*`` "not found" error names the task id."""

    async def middleware(ctx: Any, call_next: Any) -> Any:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        task_id = params.get("taskId")
        if ctx.method not in _TASK_METHODS or not isinstance(task_id, str):
            return await call_next(ctx)
        if task_id in FORGOTTEN:
            raise _not_found(task_id)
        try:
            return await call_next(ctx)
        except MCPError as exc:
            if NOT_FOUND_MESSAGE in str(exc):
                raise _not_found(task_id) from None
            raise

    return middleware


def register(runtime: TaskRuntime) -> None:
    """Register the ``leak`` tool."""

    @runtime.task_tool("leak", task_support="optional")
    async def leak(
        task: TaskContext,
        spelling: str = "raw",
        cut: int = 0,
        status: str = "working on {H}",
        prompt: str = "",
        key: str = "",
        error: str = "",
        result: str = "done with {H}",
        outcome: str = "complete",
        not_found: str = "Task {H} not found",
    ) -> str:
        """Echo the task id everywhere; end as ``outcome`` says."""

        def f(text: str) -> str:
            return fill(text, task.task_id, spelling, cut)

        await task.set_status(f(status))
        if prompt:
            schema = {
                "type": "object",
                "properties": {"ok": {"type": "boolean", "description": f(prompt)}},
                "required": ["ok"],
            }
            await task.request_input(f(prompt), schema, key=f(key) if key else None)
            await task.set_status(f(status) + " (answered)")
        if outcome == "vanish":
            FORGOTTEN[task.task_id] = f(not_found)
            await anyio.sleep(3600)
        if outcome == "tool_error":
            raise TaskToolError(f(error))
        if outcome == "rpc_error":
            raise TaskProtocolError(-32603, f(error))
        return f(result)


def build(db: str | Path) -> Any:
    """The leaky ``MCPServer`` over the task store ``db``."""
    runtime = TaskRuntime(db)
    register(runtime)
    server = build_server("leaky", runtime, version="1", log_level="WARNING")
    server.middleware.insert(0, leaky_not_found())
    return server


def _capture_auth(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            for name, value in scope.get("headers", []):
                if name.lower() == b"authorization":
                    LAST_AUTH[0] = value.decode("latin-1")
        await app(scope, receive, send)

    return wrapped


def main(argv: list[str]) -> None:
    """``stdio DB`` or ``http DB PORT``."""
    transport, db = argv[0], argv[1]
    server = build(db)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    from chit.tasks.server import TaskNameHeaderGuard

    app = _capture_auth(TaskNameHeaderGuard(server.streamable_http_app(host="127.0.0.1")))
    uvicorn.run(app, host="127.0.0.1", port=int(argv[2]), log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
