"""An in-memory scripted MCP peer: a ``Transport`` whose replies come from a Python function.

Lets tests feed arbitrary (malformed) replies to a real ``mcp.Client`` without a
subprocess. The peer speaks just enough of either handshake to reach task calls:
``server/discover`` (2026, advertising the tasks extension) or ``initialize`` (2025,
advertising core tasks); everything else goes to ``responder``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCRequest, jsonrpc_message_adapter

Responder = Callable[[str, dict[str, Any]], dict[str, Any] | None]
"""(method, params) → the JSON-RPC ``result`` object (or ``{"error": ...}``); None = silence."""

TASKS_2025: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def _handshake(method: str, generation: str) -> dict[str, Any] | None:
    if method == "server/discover":
        if generation != "2026":
            return {"error": {"code": -32601, "message": "Method not found"}}
        return {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "serverInfo": {"name": "scripted", "version": "0"},
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "public",
        }
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "tasks": TASKS_2025},
            "serverInfo": {"name": "scripted", "version": "0"},
        }
    return None


@asynccontextmanager
async def scripted_transport(
    responder: Responder, generation: str = "2025"
) -> AsyncIterator[tuple[Any, Any]]:
    """Yield ``(read_stream, write_stream)`` for ``mcp.Client`` backed by ``responder``."""
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage](64)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](
        64
    )

    async def serve() -> None:
        async with to_server_recv, to_client_send:
            async for item in to_server_recv:
                msg = item.message
                if not isinstance(msg, JSONRPCRequest):
                    continue
                params = dict(msg.params or {})
                body = _handshake(msg.method, generation) or responder(msg.method, params)
                if body is None:
                    continue
                if "error" in body and len(body) == 1:
                    wire = {"jsonrpc": "2.0", "id": msg.id, "error": body["error"]}
                else:
                    wire = {"jsonrpc": "2.0", "id": msg.id, "result": body}
                out = jsonrpc_message_adapter.validate_python(wire)
                await to_client_send.send(SessionMessage(out))

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            yield to_client_recv, to_server_send
        finally:
            await to_server_send.aclose()
            tg.cancel_scope.cancel()
