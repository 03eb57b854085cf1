"""A transport that shows every JSON-RPC message it carries to an observer.

``tapped(transport, tap)`` wraps any client transport (stdio, streamable HTTP, a test
transport): the streams the client uses are the transport's own, wrapped so that each
message is handed to ``tap(direction, message)`` as it passes — inline, on the task that
sends or receives it. (Relay tasks between two pairs of streams did the same with two
more task switches per message each way, a measurable share of a proxied call's CPU in
the daemon: ``benchmarks/proxy.py``.) The observer gets the SDK's ``SessionMessage`` (or
the ``Exception`` a transport reports) and must be quick and must not raise; the protocol
log (``chit.reconcile.protocol_log``) only keeps a reference and renders on demand.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

log = logging.getLogger(__name__)

Direction = Literal["sent", "received"]
Tap = Callable[[Direction, Any], None]
"""``tap(direction, message)``: ``message`` is a ``SessionMessage`` or an ``Exception``."""


def _observe(tap: Tap, direction: Direction, message: Any) -> None:
    try:
        tap(direction, message)
    except Exception:  # an observer never breaks the connection
        log.warning("protocol tap raised", exc_info=True)


class _TappedReceive:
    """The transport's read stream; each message received is shown to the tap first."""

    def __init__(self, inner: Any, tap: Tap) -> None:
        self._inner = inner
        self._tap = tap

    @property
    def last_context(self) -> Any:
        """The sender's context, when the transport's stream carries one (SDK duck type)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        message = await self._inner.receive()
        _observe(self._tap, "received", message)
        return message

    def __aiter__(self) -> _TappedReceive:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TappedReceive:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _TappedSend:
    """The transport's write stream; each message sent is shown to the tap first."""

    def __init__(self, inner: Any, tap: Tap) -> None:
        self._inner = inner
        self._tap = tap

    async def send(self, message: Any) -> None:
        _observe(self._tap, "sent", message)
        await self._inner.send(message)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TappedSend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def tapped(transport: Any, tap: Tap) -> AsyncIterator[tuple[Any, Any]]:
    """Enter ``transport`` and yield ``(read, write)`` streams that report to ``tap``."""
    async with transport as (inner_read, inner_write):
        yield _TappedReceive(inner_read, tap), _TappedSend(inner_write, tap)
