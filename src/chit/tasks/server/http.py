"""Streamable HTTP guard: ``Mcp-Name`` must equal ``params.taskId`` on ``tasks/*``.

SEP-2663 makes clients mirror the task id into ``Mcp-Name`` on ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` so intermediaries can route on it; the server MUST
reject a mismatch with HTTP 400 and JSON-RPC -32020. The SDK validates the header only
for the core name-bearing methods, so this ASGI wrapper covers the task methods. A
missing header is tolerated (older clients); only a contradicting one is rejected.
"""

from __future__ import annotations

import json
from typing import Any

from chit.tasks.wire import HEADER_MISMATCH, TASKS_CANCEL, TASKS_GET, TASKS_UPDATE

_TASK_METHODS = frozenset({TASKS_GET, TASKS_UPDATE, TASKS_CANCEL})

# How long chit's HTTP servers (sidecar, proxy, demo server) keep an idle keep-alive
# connection. uvicorn's default is 5 s, and httpx (the MCP SDK's client) keeps an idle
# connection for 5 s too: a client could send a request down a connection at the instant
# the server closed it, and the request failed with ReadError('') — seen under load as
# one of 500 concurrent ``work_start`` calls failing. A server must outlast its clients'
# idle expiry (httpx 5 s, Node 4-5 s, aiohttp 15 s) so that the client always closes
# first; 65 s is the usual choice behind proxies with a 60 s idle timeout.
KEEP_ALIVE_S = 65
_MAX_PEEK = 4 << 20  # larger bodies are left to the SDK's own size limit

Scope = dict[str, Any]
Message = dict[str, Any]


class TaskNameHeaderGuard:
    """ASGI middleware wrapping the MCP app (see module docstring)."""

    def __init__(self, app: Any) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Check POST bodies carrying ``Mcp-Name``; pass everything else through."""
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        name = headers.get("mcp-name")
        if name is None:
            await self.app(scope, receive, send)
            return
        body, messages = await _read_body(receive)
        mismatch = _mismatch(body, name.strip())
        if mismatch is not None:
            await _reject(send, mismatch)
            return
        await self.app(scope, _replay(messages, receive), send)


async def _read_body(receive: Any) -> tuple[bytes, list[Message]]:
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body") or size > _MAX_PEEK:
            break
    return b"".join(chunks), messages


def _replay(messages: list[Message], receive: Any) -> Any:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        message: Message = await receive()
        return message

    return replayed


def _mismatch(body: bytes, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # not ours to judge: pass on
        return None
    if not isinstance(data, dict) or data.get("method") not in _TASK_METHODS:
        return None
    params = data.get("params")
    task_id = params.get("taskId") if isinstance(params, dict) else None
    if task_id is None or task_id == name:
        return None
    return {
        "jsonrpc": "2.0",
        "id": data.get("id"),
        "error": {
            "code": HEADER_MISMATCH,
            "message": "Mcp-Name header does not match params.taskId",
        },
    }


async def _reject(send: Any, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
