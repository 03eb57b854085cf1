"""``chit proxy SERVER``: the MCP server a host launches in place of SERVER.

Assembly: attach to SERVER through the backend (the daemon, or an engine in this
process), then serve an ``MCPServer`` named after SERVER (its name, version, title and
instructions) whose middleware is :class:`~chit.proxy.host.ProxyHost`, with chit's own
task runtime (``TasksExtension`` over ``HOME/proxy/SERVER.tasks.db``) serving the
``tasks/*`` of the tasks it hands to the host. Over stdio (the default) or streamable
HTTP (``--http HOST:PORT``, at ``/mcp``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chit.home import Home, ensure_private_dir
from chit.proxy.backend import ProxyBackend
from chit.proxy.calls import PROXY_TOOL
from chit.proxy.host import ProxyHost
from chit.proxy.mirror import mirror_tool
from chit.proxy.models import AttachParams, UpstreamInfo
from chit.receipts import HostInfo
from chit.tasks.server import TaskNameHeaderGuard, TaskRuntime, TasksExtension
from chit.tasks.server.http import KEEP_ALIVE_S

log = logging.getLogger("chit.proxy")

DAY_MS = 24 * 3600 * 1000
TASK_POLL_MS = 1000
"""``pollInterval`` suggested to hosts (the engine, not the host, polls the server)."""


def task_store_path(home: Home, server: str) -> Path:
    """The proxy's task store for ``server`` (shared by every proxy of that server)."""
    folder = home.root / "proxy"
    ensure_private_dir(folder)
    return folder / f"{server}.tasks.db"


class _LatePeer:
    """The engine's peer before the host object exists (attach comes first)."""

    def __init__(self) -> None:
        self.host: ProxyHost | None = None

    async def input(self, route: str, method: str, params: dict[str, Any] | None) -> Any:
        assert self.host is not None
        return await self.host.input(route, method, params)

    async def progress(
        self, route: str, progress: float, total: float | None, message: str | None
    ) -> None:
        if self.host is not None:
            await self.host.progress(route, progress, total, message)

    async def notice(self, method: str, params: dict[str, Any] | None) -> None:
        if self.host is not None:
            await self.host.notice(method, params)


async def open_host(backend: ProxyBackend, home: Home, server: str) -> ProxyHost:
    """Attach to ``server`` and build the host-facing state (task runtime not started)."""
    peer = _LatePeer()
    info: UpstreamInfo = await backend.attach(AttachParams(server=server, host=HostInfo()), peer)
    runtime = TaskRuntime(
        task_store_path(home, server), default_ttl_ms=DAY_MS, poll_interval_ms=TASK_POLL_MS
    )
    host = ProxyHost(backend, info, runtime)
    runtime.task_tool(PROXY_TOOL, task_support="optional", resumable=True)(mirror_tool(host))
    peer.host = host
    return host


def build_mcp_server(host: ProxyHost) -> Any:
    """The ``MCPServer`` the host talks to (see the module docstring)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import SubscriptionsListenRequestParams

    from chit.tasks.server.listen import TaskListenHandler

    ext = TasksExtension(host.runtime)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        async with host.runtime.running():
            yield {}

    info = host.info.server_info
    server = MCPServer(
        str(info.get("name") or host.server),
        title=info.get("title"),
        description=info.get("description"),
        version=str(info.get("version") or ""),
        website_url=info.get("websiteUrl"),
        instructions=host.info.instructions,
        extensions=[ext],
        lifespan=lifespan,
        middleware=[host],
        log_level="WARNING",
    )
    listen = TaskListenHandler(server._subscriptions, ext)
    server._lowlevel_server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, listen
    )
    host.bus = server._subscriptions
    return server


async def serve_stdio(host: ProxyHost) -> None:
    """Serve the host on this process's stdin/stdout until it closes them."""
    from chit.proxy import fast
    from chit.proxy.stdio import host_stdio

    server = build_mcp_server(host)
    lowlevel = server._lowlevel_server
    intercept = fast.FastPath(host).take if fast.enabled() else None
    async with host_stdio(intercept) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def serve_http(host: ProxyHost, address: str, port: int) -> None:
    """Serve streamable HTTP at ``http://address:port/mcp`` until cancelled."""
    import uvicorn

    server = build_mcp_server(host)
    app = TaskNameHeaderGuard(server.streamable_http_app(host=address))
    config = uvicorn.Config(
        app,
        host=address,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    await uvicorn.Server(config).serve()
