"""One client of the control socket: its frames, its subscriptions, its requests to it."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup

from chit.engine import rpc
from chit.engine.lines import LineSocket

log = logging.getLogger("chit.daemon")


class Connection:
    """One client: its stream, its subscriptions, and a lock that keeps frames whole.

    The socket is symmetric: the daemon may also send the client requests
    (:meth:`request`, ids ``d1``, ``d2``, … so they never meet the client's own), used
    by ``chit proxy`` to ask a host what the server asks.
    """

    def __init__(self, stream: SocketStream, tg: TaskGroup, number: int) -> None:
        self.stream = stream
        self.lines = LineSocket(stream.extra(SocketAttribute.raw_socket), rpc.MAX_FRAME)
        self.tg = tg
        self.number = number
        self.greeted = False
        self.compatible = True
        self.subscriptions: dict[str, anyio.CancelScope] = {}
        self.closed = False
        self.on_close: list[Callable[[], None]] = []
        self._requests = itertools.count(1)
        self._replies: dict[str, tuple[anyio.Event, list[rpc.Frame]]] = {}

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> rpc.Frame:
        """Send the client a request; its response frame.

        Raises:
            TimeoutError: no answer within ``timeout``.
            anyio.BrokenResourceError: the client went away first.
        """
        request_id = f"d{next(self._requests)}"
        done: tuple[anyio.Event, list[rpc.Frame]] = (anyio.Event(), [])
        self._replies[request_id] = done
        try:
            await self.send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            with anyio.fail_after(timeout):
                await done[0].wait()
        finally:
            self._replies.pop(request_id, None)
        if not done[1]:
            raise anyio.BrokenResourceError("the client went away")
        return done[1][0]

    def resolve(self, frame: rpc.Frame) -> None:
        """A response of the client to one of the daemon's requests."""
        waiting = self._replies.get(str(frame.id))
        if waiting is not None:
            waiting[1].append(frame)
            waiting[0].set()

    def close(self) -> None:
        """The connection ended: wake the daemon's waiting requests, run the close hooks."""
        self.closed = True
        self.lines.detach()
        for event, _ in self._replies.values():
            event.set()
        for hook in self.on_close:
            try:
                hook()
            except Exception:
                log.exception("a close hook of client %d failed", self.number)

    def send_nowait(self, frame: dict[str, Any]) -> None:
        """Write one frame now, or after what waits to be written (never blocks)."""
        if self.closed:
            return
        try:
            self.lines.send_nowait(rpc.encode(frame))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.closed = True

    async def send(self, frame: dict[str, Any]) -> None:
        """Write one frame (dropped when the client is gone)."""
        if self.closed:
            return
        data = rpc.encode(frame)
        try:
            await self.lines.send(data)  # whole frames, in order: no lock needed
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.closed = True


__all__ = ["Connection"]
