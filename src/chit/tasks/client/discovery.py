"""Tool listing with effective task support, and the server summary for a servers screen."""

from __future__ import annotations

from mcp.client.session import ClientSession
from mcp_types import Implementation, PaginatedRequestParams

from chit.tasks import wire
from chit.tasks.client.errors import classify
from chit.tasks.client.models import ServerSummary, ToolInfo

MAX_PAGES = 100
"""A paginator that never ends must not hang the client."""


async def list_tool_infos(
    session: ClientSession, generation: wire.Generation | None
) -> list[ToolInfo]:
    """List every tool (all pages) with what the task protocol allows for it.

    2025: the tool's ``execution.taskSupport`` (absent → ``forbidden``). 2026: ``optional``
    for every tool when the server declares the extension (the server decides per call).
    Without task support: ``forbidden``.
    """
    tools: list[ToolInfo] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        try:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
        except Exception as exc:
            raise classify(exc, "tools/list") from exc
        for tool in page.tools:
            support: wire.TaskSupport = "forbidden"
            if generation == wire.PROTOCOL_2026:
                support = "optional"
            elif generation == wire.PROTOCOL_2025 and tool.execution is not None:
                support = tool.execution.task_support or "forbidden"
            tools.append(
                ToolInfo(
                    name=tool.name,
                    title=tool.title,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    task_support=support,
                    tool=tool,
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def summarize(
    info: Implementation | None, protocol_version: str, generation: wire.Generation | None
) -> ServerSummary:
    """Build the :class:`ServerSummary` of a connection."""
    if generation == wire.PROTOCOL_2026:
        detail = f"{wire.EXTENSION_ID} extension"
    elif generation == wire.PROTOCOL_2025:
        detail = "2025-11-25 core tasks (per-tool taskSupport)"
    else:
        detail = "no task support advertised"
    return ServerSummary(
        name=info.name if info else None,
        version=info.version if info else None,
        protocol_version=protocol_version,
        generation=generation,
        tasks_supported=generation is not None,
        tasks_detail=detail,
    )


__all__ = ["MAX_PAGES", "list_tool_infos", "summarize"]
