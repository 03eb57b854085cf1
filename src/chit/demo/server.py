"""Assembly of ``chit demo-server``: the task runtime, the fixtures, the transports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chit.demo.fixtures import register_plain_tools, register_task_tools
from chit.heap import settle
from chit.home import Home
from chit.tasks.server import TaskNameHeaderGuard, TaskRuntime, build_server
from chit.tasks.server.http import KEEP_ALIVE_S


def default_db_path(home: Home) -> Path:
    """``demo-tasks.db`` in the chit home (0700): never a shared temp directory.

    The store holds raw task ids (bearer capabilities) and results, so it lives with the
    rest of the home's private state; a chit that spawns ``chit demo-server`` over stdio
    passes its home in ``CHIT_HOME`` (see ``Registry.resolve``).
    """
    return home.tasks_db_path


def build_demo_server(db_path: str | Path, **runtime_options: Any) -> Any:
    """Return the demo ``MCPServer`` over the task store ``db_path`` (a path or a URL).

    Raises:
        StoreUnavailable: A ``postgresql://`` store cannot be reached.
    """
    runtime = TaskRuntime(db_path, **runtime_options)
    register_task_tools(runtime)
    server = build_server("chit-demo", runtime, version="1", log_level="WARNING")
    register_plain_tools(server)
    return server


def run_stdio(server: Any) -> None:
    """Serve ``server`` (see :func:`build_demo_server`) on stdin/stdout until EOF.

    Through :mod:`chit.tasks.server.stdio`, not the SDK's transport: the SDK writes each
    message with two worker-thread round trips, and a task's end waited behind every
    earlier notification's (docs/performance.md, "Task server delivery").
    """
    from chit.tasks.server.stdio import run_stdio as serve

    settle()  # a full collection over the imports held a burst of task ends (chit.heap)
    serve(server)


def run_http(server: Any, host: str, port: int) -> None:
    """Serve ``server`` as streamable HTTP on ``http://host:port/mcp`` until interrupted."""
    import uvicorn

    app = TaskNameHeaderGuard(server.streamable_http_app(host=host))
    settle()  # as run_stdio
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
