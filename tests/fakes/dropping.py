"""A ``Transport`` wrapper that loses the reply to the first request of a given method.

Simulates "the server applied my request but its reply never reached me" - the case
chit's request key exists for. The dropped reply is kept in ``dropped`` so a test can
check that a retry with the same key yields the same task.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCRequest, JSONRPCResponse


class DroppingTransport:
    """Wrap ``inner`` (an entered-once transport); drop the first reply to ``method``."""

    def __init__(self, inner: Any, method: str = "tools/call") -> None:
        self.inner = inner
        self.method = method
        self.dropped: list[dict[str, Any]] = []
        self._target_id: Any = None
        self._done = False
        self._tg: Any = None

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self.inner.__aenter__()
        out_send, out_recv = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        in_send, in_recv = anyio.create_memory_object_stream[SessionMessage](64)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()

        async def pump_in() -> None:  # server → client, filtering
            async with out_send:
                async for item in read:
                    msg = item.message if isinstance(item, SessionMessage) else None
                    if (
                        isinstance(msg, JSONRPCResponse)
                        and not self._done
                        and self._target_id is not None
                        and msg.id == self._target_id
                    ):
                        self._done = True
                        self.dropped.append(msg.result)
                        continue
                    await out_send.send(item)

        async def pump_out() -> None:  # client → server, noting the target request id
            async with in_recv:
                async for item in in_recv:
                    msg = item.message
                    if (
                        isinstance(msg, JSONRPCRequest)
                        and msg.method == self.method
                        and self._target_id is None
                    ):
                        self._target_id = msg.id
                    await write.send(item)

        self._tg.start_soon(pump_in)
        self._tg.start_soon(pump_out)
        return out_recv, in_send

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        await self.inner.__aexit__(exc_type, exc, tb)
