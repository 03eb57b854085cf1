"""A transport that shows every JSON-RPC message it carries to an observer.

``tapped(transport, tap)`` wraps any client transport (stdio, streamable HTTP, a test
transport): two relay tasks copy messages between the real streams and the ones the
client uses, and hand each to ``tap(direction, message)`` on the way. The observer gets
the SDK's ``SessionMessage`` (or the ``Exception`` a transport reports) and must be
quick and must not raise; the protocol log (``chit.reconcile.protocol_log``) only keeps
a reference and renders on demand.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio

log = logging.getLogger(__name__)

Direction = Literal["sent", "received"]
Tap = Callable[[Direction, Any], None]
"""``tap(direction, message)``: ``message`` is a ``SessionMessage`` or an ``Exception``."""

_BUFFER = 64


def _observe(tap: Tap, direction: Direction, message: Any) -> None:
    try:
        tap(direction, message)
    except Exception:  # an observer never breaks the connection
        log.warning("protocol tap raised", exc_info=True)


@asynccontextmanager
async def tapped(transport: Any, tap: Tap) -> AsyncIterator[tuple[Any, Any]]:
    """Enter ``transport`` and yield ``(read, write)`` streams that report to ``tap``."""
    async with transport as (inner_read, inner_write):
        to_client_send, to_client = anyio.create_memory_object_stream[Any](_BUFFER)
        from_client, from_client_receive = anyio.create_memory_object_stream[Any](_BUFFER)

        gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)

        async def down() -> None:
            # The server's side ending (or breaking) ends the client's read stream.
            async with to_client_send:
                try:
                    async for message in inner_read:
                        _observe(tap, "received", message)
                        await to_client_send.send(message)
                except gone:
                    return

        async def up() -> None:
            async with from_client_receive:
                try:
                    async for message in from_client_receive:
                        _observe(tap, "sent", message)
                        await inner_write.send(message)
                except gone:
                    return
            await inner_write.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(down)
            tg.start_soon(up)
            try:
                yield to_client, from_client
            finally:
                tg.cancel_scope.cancel()
