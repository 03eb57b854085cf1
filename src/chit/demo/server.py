"""Assembly of ``chit demo-server``: the task runtime, the fixtures, the transports."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from chit.demo.fixtures import register_plain_tools, register_task_tools
from chit.tasks.server import TaskNameHeaderGuard, TaskRuntime, build_server


def default_db_path() -> Path:
    """``$CHIT_HOME/demo-tasks.db`` when CHIT_HOME is set, else a per-user temp file."""
    home = os.environ.get("CHIT_HOME")
    if home:
        return Path(home).expanduser() / "demo-tasks.db"
    return Path(tempfile.gettempdir()) / f"chit-demo-tasks-{os.getuid()}.db"


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
    """Serve ``server`` (see :func:`build_demo_server`) on stdin/stdout until EOF."""
    server.run("stdio")


def run_http(server: Any, host: str, port: int) -> None:
    """Serve ``server`` as streamable HTTP on ``http://host:port/mcp`` until interrupted."""
    import uvicorn

    app = TaskNameHeaderGuard(server.streamable_http_app(host=host))
    uvicorn.run(app, host=host, port=port, log_level="warning")
