"""Helpers for the ``test_tasks_server_*`` modules (no tests here).

The tests drive the server with the plain ``mcp`` SDK client, sending ``tasks/*`` and
task-augmented ``tools/call`` through the session's raw dispatcher: the SDK has no
task API, and at 2025-11-25 it rejects the nested ``CreateTaskResult`` when sent
through ``send_request`` (see ``notes/mcp-tasks.md`` §4.4).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.extension import ClientExtension, NotificationBinding, advertise
from mcp.shared.dispatcher import CallOptions
from mcp_types import NotificationParams
from pydantic import ConfigDict

from chit.tasks.wire import EXTENSION_ID, TERMINAL_STATUSES
from tests.proc_support import start_chit_http
from tests.proc_support import stop as stop  # re-exported for the tests that spawn servers

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
NAME_PARAM_METHODS = {"tasks/get", "tasks/update", "tasks/cancel"}
WAIT_S = 120.0
"""Safety net of a wait for a server process (a reply, a status): never a timing."""


def make_client(target: Any, generation: str, *, extension: bool = True, **kwargs: Any) -> Client:
    """A client pinned to one generation ("2025" → legacy handshake, "2026" → 2026-07-28)."""
    mode = "legacy" if generation == "2025" else "2026-07-28"
    extensions = [advertise(EXTENSION_ID)] if extension else []
    extensions += kwargs.pop("extensions", [])
    # A safety net, not a timing: a stdio server's initialize waits for a Python process
    # to start (10+ s at load 12, two starting at once in the multi-process tests).
    kwargs.setdefault("read_timeout_seconds", WAIT_S)
    return Client(target, mode=mode, extensions=extensions, **kwargs)


async def raw(
    client: Client, method: str, params: Mapping[str, Any], timeout: float = WAIT_S
) -> dict[str, Any]:
    """Send a request through the session's raw dispatcher and return the result dict."""
    session = client.session
    data: dict[str, Any] = {"method": method, "params": dict(params)}
    opts: CallOptions = {}
    session._stamp(data, opts)
    if method in NAME_PARAM_METHODS:
        opts.setdefault("headers", {})["mcp-name"] = params["taskId"]
    opts["timeout"] = timeout
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


async def create(
    client: Client, generation: str, tool: str, arguments: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    """Start ``tool`` as a task; return the Task dict (unwrapping the 2025 nesting)."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = dict(meta)
    if generation == "2025":
        params["task"] = {"ttl": meta.pop("ttl", None) or 120_000}
        params.get("_meta", {}).pop("ttl", None)
        result = await raw(client, "tools/call", params)
        task: dict[str, Any] = result["task"]
        return task
    result = await raw(client, "tools/call", params)
    assert result["resultType"] == "task", result
    return result


async def poll(
    client: Client, task_id: str, *, until: set[str] | None = None, timeout: float = WAIT_S
) -> dict[str, Any]:
    """Poll ``tasks/get`` until the status is in ``until`` (default: terminal)."""
    wanted = until or set(TERMINAL_STATUSES)
    with anyio.fail_after(timeout):
        while True:
            task = await raw(client, "tasks/get", {"taskId": task_id})
            if task["status"] in wanted or task["status"] in TERMINAL_STATUSES:
                return task
            await anyio.sleep(0.05)


class _TaskNotification(NotificationParams):
    model_config = ConfigDict(extra="allow")


class TaskWatch(ClientExtension):
    """A client extension recording every ``notifications/tasks`` payload in ``seen``."""

    identifier = "io.github.chit/test-watch"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        """Observe ``notifications/tasks``."""
        return [
            NotificationBinding(
                method="notifications/tasks", params_type=_TaskNotification, handler=self._on_tasks
            )
        ]

    async def _on_tasks(self, params: _TaskNotification) -> None:
        self.seen.append(params.model_extra or {})


def store_target(request: Any, tmp: Path, name: str = "tasks.db") -> str:
    """A task store for a test parametrized with ``"sqlite"``/``"postgresql"``.

    The SQLite file ``tmp/name``, or the URL of a fresh PostgreSQL database.
    """
    if getattr(request, "param", "sqlite") == "postgresql":
        url: str = request.getfixturevalue("pg_url")
        return url
    return str(tmp / name)


def demo_env(tmp: Path) -> dict[str, str]:
    """Environment for a ``chit demo-server`` subprocess (isolated CHIT_HOME)."""
    env = dict(os.environ)
    env["CHIT_HOME"] = str(tmp / "home")
    return env


def start_http_server(db: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``chit demo-server --http`` on a free port; return (process, URL) once ready."""
    return start_chit_http(
        ["demo-server", "--db", str(db)],
        env=demo_env(tmp),
        log_dir=tmp,
        log_name="demo",
        what="demo server",
        python=PYTHON,
    )
