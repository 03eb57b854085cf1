"""Connect to one registered server: protocol, task support and tools with their schemas.

``chit.servers.list_tools`` answers the CLI's table; the new-call screen also needs each
tool's input schema, so this asks the task client directly (same errors, same timeouts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chit.home import Home

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ToolEntry:
    """One tool: name, text, input schema and task support (``forbidden`` = never a task)."""

    name: str
    title: str | None
    description: str | None
    input_schema: dict[str, Any]
    task_support: str

    @property
    def why_not_task(self) -> str | None:
        """Why a call of this tool will not become a task (None when it can)."""
        if self.task_support == "forbidden":
            return "the tool (or server) does not support tasks: the call runs synchronously"
        return None


@dataclass(frozen=True)
class Probe:
    """What one connection told chit."""

    server: str
    server_name: str | None
    server_version: str | None
    protocol_version: str
    generation: str | None
    tasks_detail: str
    tools: tuple[ToolEntry, ...] = field(default_factory=tuple)


def from_tools(info: Any) -> Probe:
    """The engine's ``ToolsInfo`` (``chit.engine.models``) as the screens' :class:`Probe`."""
    return Probe(
        server=info.server,
        server_name=info.server_name,
        server_version=info.server_version,
        protocol_version=info.protocol_version,
        generation=info.generation,
        tasks_detail=info.tasks_detail,
        tools=tuple(
            ToolEntry(t.name, t.title, t.description, dict(t.input_schema), t.task_support)
            for t in info.tools
        ),
    )


def probe(home: Home, name: str, timeout: float = TIMEOUT_S) -> Probe:
    """Connect to server ``name`` of ``home`` and describe it.

    Raises:
        ServerUnreachable: it could not be started or reached in time.
        ServerProtocolError: it answered with an error or invalid MCP.
    """
    import anyio

    from chit.servers import Registry
    from chit.servers.tools import ServerProtocolError, ServerUnreachable, client_spec
    from chit.tasks.client import TaskClient, TaskError, TransientError

    resolved = Registry.for_home(home).resolve(name)

    async def run() -> Probe:
        with anyio.fail_after(timeout):
            async with TaskClient(client_spec(resolved), read_timeout=timeout) as client:
                tools = await client.list_tools()
                s = client.server_summary()
        return Probe(
            server=name,
            server_name=s.name,
            server_version=s.version,
            protocol_version=s.protocol_version,
            generation=s.generation,
            tasks_detail=s.tasks_detail,
            tools=tuple(
                ToolEntry(t.name, t.title, t.description, dict(t.input_schema), str(t.task_support))
                for t in tools
            ),
        )

    try:
        return anyio.run(run)
    except TimeoutError:
        raise ServerUnreachable(f"server {name!r} did not answer within {timeout:g} s") from None
    except TransientError as exc:
        raise ServerUnreachable(f"server {name!r} is unreachable: {exc.message}") from None
    except TaskError as exc:
        raise ServerProtocolError(f"server {name!r}: {exc}") from None
    except OSError as exc:
        raise ServerUnreachable(f"server {name!r} could not be started: {exc}") from None
