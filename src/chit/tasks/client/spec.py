"""How to reach a server: stdio command, streamable HTTP URL, or an in-process server."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TextIO

import httpx2
from mcp.client._transport import Transport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from chit.tasks.client import pipes
from chit.tasks.client.noise import StdoutNoise, counted_stdio
from chit.tasks.client.pipe_stdio import pipe_stdio
from chit.tasks.client.pipes import ServerPipes
from chit.tasks.client.tap import Tap, tapped


@dataclass(frozen=True)
class StdioServer:
    """A server launched as a subprocess speaking MCP over stdin/stdout.

    Attributes:
        stderr: Where the child's stderr goes (default: ours). Tests pass a file so a
            noisy server does not flood the test log. Lines it prints on stdout that are
            not MCP are logged there too (``chit.tasks.client.noise``).
        label: How messages name the server (its registry name); default: the command.
        declare: Client capabilities to declare beyond elicitation (``sampling``,
            ``roots``): the server's requests for them are routed like elicitation.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    stderr: TextIO | None = None
    label: str | None = None
    declare: tuple[str, ...] = ()

    def describe(self) -> str:
        """A human label (never includes env values, which may hold secrets)."""
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """A streamable-HTTP endpoint; ``headers`` go on every request (e.g. a bearer token).

    ``declare``: client capabilities beyond elicitation, as for :class:`StdioServer`.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    declare: tuple[str, ...] = ()

    def describe(self) -> str:
        """A human label (the URL without credentials in the userinfo part)."""
        scheme, sep, rest = self.url.partition("://")
        authority, slash, path = rest.partition("/")
        host = authority.rpartition("@")[2]
        return f"{scheme}{sep}{host}{slash}{path}" if sep else self.url


@dataclass(frozen=True)
class InProcessServer:
    """A server object in this process (tests, embedding).

    ``declare``: client capabilities beyond elicitation, as for :class:`StdioServer`.
    """

    server: Server[Any] | MCPServer
    declare: tuple[str, ...] = ()

    def describe(self) -> str:
        """A human label."""
        return f"in-process {type(self.server).__name__}"


@dataclass(frozen=True)
class TransportServer:
    """Any ``mcp`` client ``Transport`` (an async context manager yielding the two streams).

    For tests with scripted peers; one instance can be entered once.
    """

    transport: Transport

    def describe(self) -> str:
        """A human label."""
        return f"transport {type(self.transport).__name__}"


ServerSpec = StdioServer | HttpServer | InProcessServer | TransportServer
"""Anything :class:`~chit.tasks.client.TaskClient` can connect to."""


async def open_target(
    spec: ServerSpec,
    stack: AsyncExitStack,
    tap: Tap | None = None,
    on_pipes: Callable[[ServerPipes | None], None] | None = None,
) -> Any:
    """Return the object to hand to ``mcp.Client(server=...)`` for ``spec``.

    Resources that must outlive the call (the HTTP connection pool) are entered on
    ``stack`` so they close with the client. With ``tap``, every message of a transport
    (not of an in-process server, which has none) is shown to it. A stdio server is
    served on the event loop where it can be (:mod:`chit.tasks.client.pipes`);
    ``on_pipes`` is then told its :class:`ServerPipes`.
    """
    if isinstance(spec, InProcessServer):
        return spec.server
    transport = await _transport(spec, stack, tap, on_pipes)
    return tapped(transport, tap) if tap is not None else transport


async def _transport(
    spec: StdioServer | HttpServer | TransportServer,
    stack: AsyncExitStack,
    tap: Tap | None,
    on_pipes: Callable[[ServerPipes | None], None] | None,
) -> Any:
    if isinstance(spec, TransportServer):
        return spec.transport
    if isinstance(spec, StdioServer) and pipes.available():
        label = repr(spec.label) if spec.label else repr(os.path.basename(spec.command))
        return pipe_stdio(
            spec.command,
            list(spec.args),
            env=dict(spec.env) if spec.env is not None else None,
            cwd=spec.cwd,
            errlog=spec.stderr if spec.stderr is not None else sys.stderr,
            noise=StdoutNoise(label, sink=spec.stderr),
            tap=tap,
            on_pipes=on_pipes,
        )
    if isinstance(spec, StdioServer):
        params = StdioServerParameters(
            command=spec.command,
            args=list(spec.args),
            env=dict(spec.env) if spec.env is not None else None,
            cwd=spec.cwd,
        )
        transport = stdio_client(
            params, errlog=spec.stderr if spec.stderr is not None else sys.stderr
        )
        label = repr(spec.label) if spec.label else repr(os.path.basename(spec.command))
        return counted_stdio(transport, StdoutNoise(label, sink=spec.stderr))
    http = await stack.enter_async_context(http_client(spec.headers))
    return streamable_http_client(spec.url, http_client=http)


# chit drops an idle pooled connection after 2 s, well before the 5 s after which common
# servers (uvicorn, Node's http) close theirs: with equal expiries a reused connection can
# be closed by the server as the request goes out, and the request fails with ReadError —
# in the SDK that ends the whole session. A connection in steady use (polls, a held
# stream) is still reused; one left idle costs a reconnect.
IDLE_EXPIRY_S = 2.0


def http_client(headers: Mapping[str, str]) -> httpx2.AsyncClient:
    """The HTTP client for one server: the SDK's timeouts, a short idle-connection expiry."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        # The SDK's pool sizes (httpx2.DEFAULT_LIMITS), only the expiry changed.
        limits=httpx2.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=IDLE_EXPIRY_S
        ),
    )


__all__ = [
    "HttpServer",
    "InProcessServer",
    "ServerSpec",
    "StdioServer",
    "TransportServer",
    "open_target",
]
