"""Connecting to a registered server and listing its tools with their task support.

The MCP client lives in ``chit.tasks.client``; this module maps a resolved spec onto it
and its failures onto chit's exit codes: cannot connect or no answer in time →
``UNREACHABLE``; an answer that is an error or malformed → ``PROTOCOL``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

from chit.errors import ChitError, ExitCode
from chit.servers.resolve import ResolvedServer

DEFAULT_TIMEOUT_S = 20.0


class ServerUnreachable(ChitError):
    """The server could not be started/reached, or did not answer in time."""

    exit_code = ExitCode.UNREACHABLE


class ServerProtocolError(ChitError):
    """The server answered with an error or something that is not valid MCP."""

    exit_code = ExitCode.PROTOCOL


@dataclass(frozen=True)
class ToolRow:
    """One tool, what the task protocol lets chit do with it, and its input schema."""

    name: str
    title: str | None
    description: str | None
    task_support: str
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolsListing:
    """The answer of ``chit tools SERVER``.

    Attributes:
        extension_declared: For servers that negotiated a 2026 protocol version, whether
            they declare the ``io.modelcontextprotocol/tasks`` extension; ``None`` for
            servers on the 2025 handshake (where it does not apply).
    """

    server: str
    server_name: str | None
    server_version: str | None
    protocol_version: str
    generation: str | None
    extension_declared: bool | None
    tasks_detail: str
    tools: list[ToolRow]

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        from dataclasses import asdict

        return asdict(self)


def client_spec(resolved: ResolvedServer, stderr: TextIO | None = None) -> Any:
    """Return the ``chit.tasks.client`` server spec for ``resolved``."""
    from chit.tasks.client import HttpServer, StdioServer

    if resolved.transport == "http":
        return HttpServer(url=resolved.url or "", headers=dict(resolved.headers))
    return StdioServer(
        command=resolved.command or "",
        args=tuple(resolved.args),
        env=dict(resolved.env) or None,
        cwd=resolved.cwd,
        stderr=stderr,
        label=resolved.name,
    )


def _last_line(log: IO[str]) -> str:
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return f" (server stderr: {lines[-1][:200]})" if lines else ""


async def list_tools_async(
    resolved: ResolvedServer, *, timeout: float = DEFAULT_TIMEOUT_S
) -> ToolsListing:
    """Connect to ``resolved`` and list its tools.

    Raises:
        ServerUnreachable: the server cannot be started or reached, or is too slow.
        ServerProtocolError: the server answered with an error or invalid MCP.
    """
    import anyio
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from chit.tasks import wire
    from chit.tasks.client import TaskClient, TaskError, TransientError

    # A stdio child's stderr goes to a temp file, not ours: it keeps chit's stderr to one
    # line, and the last line it wrote explains most start-up failures.
    log: TextIO
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log:
        where = f"server {resolved.name!r}"
        try:
            with anyio.fail_after(timeout):
                async with TaskClient(
                    client_spec(resolved, log), read_timeout=min(timeout, 30.0)
                ) as client:
                    tools = await client.list_tools()
                    summary = client.server_summary()
        except TimeoutError:
            raise ServerUnreachable(
                f"{where} did not answer within {timeout:g} s{_last_line(log)}"
            ) from None
        except TransientError as exc:
            raise ServerUnreachable(
                f"{where} is unreachable: {exc.message}{_last_line(log)}"
            ) from None
        except TaskError as exc:
            raise ServerProtocolError(f"{where}: {exc}") from None
        except OSError as exc:  # e.g. the command does not exist
            raise ServerUnreachable(f"{where} could not be started: {exc}") from None
    modern = summary.protocol_version in MODERN_PROTOCOL_VERSIONS
    return ToolsListing(
        server=resolved.name,
        server_name=summary.name,
        server_version=summary.version,
        protocol_version=summary.protocol_version,
        generation=summary.generation,
        extension_declared=(summary.generation == wire.PROTOCOL_2026) if modern else None,
        tasks_detail=summary.tasks_detail,
        tools=[
            ToolRow(t.name, t.title, t.description, t.task_support, dict(t.input_schema))
            for t in tools
        ],
    )


def list_tools(resolved: ResolvedServer, *, timeout: float = DEFAULT_TIMEOUT_S) -> ToolsListing:
    """Synchronous wrapper of :func:`list_tools_async` (for the CLI)."""
    import anyio

    async def run() -> ToolsListing:
        return await list_tools_async(resolved, timeout=timeout)

    return anyio.run(run)
