"""The proxy's door to the engine: :class:`ProxyBackend`, and its in-process implementation.

The host-facing MCP server (:mod:`chit.proxy.server`) needs the engine for two kinds of
things: the server's session (attach, forward requests and notifications, start calls
that may become tasks, fetch a finished task's result) and the receipts (read, follow,
answer, cancel). :class:`LocalBackend` serves both from an engine in this process
(``--no-daemon``, tests); :class:`chit.proxy.remote.RemoteBackend` asks the daemon,
where the sessions live, over its control socket.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from anyio.abc import ObjectReceiveStream

from chit.engine.local import LocalEngine
from chit.engine.models import EngineEvent
from chit.proxy.models import (
    Answer,
    AttachParams,
    ConnectedHost,
    ForwardParams,
    HostParams,
    NotifyParams,
    ServerRequest,
    StartParams,
    StartReply,
    UpstreamInfo,
)
from chit.proxy.sampled import server_request
from chit.proxy.starts import Starts
from chit.proxy.upstream import Attachment, HostPeer, Upstreams
from chit.receipts import Receipt


class ProxyBackend(Protocol):
    """What a proxy asks of the engine (every method may raise ``ChitError``)."""

    async def attach(self, params: AttachParams, peer: HostPeer) -> UpstreamInfo:
        """Attach to ``params.server`` (connecting its session); return what it is."""
        ...

    async def set_host(self, params: HostParams) -> None:
        """The host introduced itself (name, version, capabilities)."""
        ...

    async def request(self, p: ForwardParams) -> Answer:
        """Forward one request; the server's result or JSON-RPC error."""
        ...

    async def notify(self, p: NotifyParams) -> None:
        """Forward one notification."""
        ...

    async def cancel_route(self, route: str) -> None:
        """The host cancelled a forwarded request."""
        ...

    async def start(self, p: StartParams) -> StartReply:
        """A ``tools/call`` that may become a task (intent first, receipt after)."""
        ...

    async def outcome(self, receipt_id: str) -> Answer:
        """The full (redacted) result of a finished task."""
        ...

    async def gave_up(self, receipt_id: str, why: str) -> Receipt:
        """The host stopped waiting for the task."""
        ...

    async def receipt(self, receipt_id: str) -> Receipt:
        """The receipt as stored now."""
        ...

    def receipt_events(
        self, receipt_id: str
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[EngineEvent]]:
        """The receipt's changes from now on."""
        ...

    async def question(self, receipt_id: str, key: str) -> ServerRequest:
        """The server's own request behind one of the receipt's questions, redacted
        (empty when it is not at hand: the host is asked from the stored copy)."""
        ...

    async def answer_for_host(self, receipt_id: str, key: str, reply: dict[str, Any]) -> Receipt:
        """Pass the host's reply to one of the receipt's prompts on, as it gave it."""
        ...

    async def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel the task."""
        ...

    async def hosts(self) -> list[ConnectedHost]:
        """Hosts attached to the engine right now."""
        ...


class EngineSide:
    """The engine-side parts of the proxy on one LocalEngine (also used by the daemon)."""

    def __init__(self, engine: LocalEngine) -> None:
        """Take the engine's unrouted server traffic and serve proxies on its sessions."""
        self.engine = engine
        self.upstreams = Upstreams(engine.supervisor)
        self.starts = Starts(engine.supervisor)
        self.starts.attached = lambda att: att.number in self.upstreams.attachments

    async def question(self, receipt_id: str, key: str) -> ServerRequest:
        """See :meth:`ProxyBackend.question` (:mod:`chit.proxy.sampled`)."""
        found = await server_request(self.engine.supervisor, receipt_id, key)
        return ServerRequest.model_validate(found or {})


class LocalBackend:
    """A :class:`ProxyBackend` over an engine in this process (one attachment)."""

    def __init__(self, side: EngineSide) -> None:
        """Serve through ``side`` (see :class:`EngineSide`)."""
        self.side = side
        self.att: Attachment | None = None

    def _att(self) -> Attachment:
        if self.att is None:
            raise RuntimeError("attach first")
        return self.att

    async def attach(self, params: AttachParams, peer: HostPeer) -> UpstreamInfo:
        """See :meth:`ProxyBackend.attach` (a second attach updates the host)."""
        if self.att is not None:
            self.side.upstreams.detach(self.att)
        self.att, info = await self.side.upstreams.attach(params, peer)
        return info

    def detach(self) -> None:
        """Forget the attachment (the proxy stops)."""
        if self.att is not None:
            self.side.upstreams.detach(self.att)
            self.att = None

    async def set_host(self, params: HostParams) -> None:
        """See :meth:`ProxyBackend.set_host`."""
        self.side.upstreams.set_host(self._att(), params)

    async def request(self, p: ForwardParams) -> Answer:
        """See :meth:`ProxyBackend.request`."""
        return await self.side.upstreams.forward(self._att(), p)

    async def notify(self, p: NotifyParams) -> None:
        """See :meth:`ProxyBackend.notify`."""
        await self.side.upstreams.notify(self._att(), p)

    async def cancel_route(self, route: str) -> None:
        """See :meth:`ProxyBackend.cancel_route`."""
        self.side.upstreams.cancel(self._att(), route)

    async def start(self, p: StartParams) -> StartReply:
        """See :meth:`ProxyBackend.start`."""
        return await self.side.starts.start(self._att(), p)

    async def outcome(self, receipt_id: str) -> Answer:
        """See :meth:`ProxyBackend.outcome`."""
        return await self.side.starts.outcome(receipt_id)

    async def gave_up(self, receipt_id: str, why: str) -> Receipt:
        """See :meth:`ProxyBackend.gave_up`."""
        return await self.side.starts.gave_up(self._att(), receipt_id, why)

    async def receipt(self, receipt_id: str) -> Receipt:
        """See :meth:`ProxyBackend.receipt`."""
        return await self.side.engine.receipt(receipt_id)

    @asynccontextmanager
    async def receipt_events(
        self, receipt_id: str
    ) -> AsyncIterator[ObjectReceiveStream[EngineEvent]]:
        """See :meth:`ProxyBackend.receipt_events`."""
        async with self.side.engine.events(receipt_id=receipt_id) as stream:
            yield stream

    async def question(self, receipt_id: str, key: str) -> ServerRequest:
        """See :meth:`ProxyBackend.question`."""
        return await self.side.question(receipt_id, key)

    async def answer_for_host(self, receipt_id: str, key: str, reply: dict[str, Any]) -> Receipt:
        """See :meth:`ProxyBackend.answer_for_host`."""
        return await self.side.starts.answer(receipt_id, key, reply)

    async def cancel(self, receipt_id: str) -> Receipt:
        """See :meth:`ProxyBackend.cancel`."""
        return await self.side.engine.cancel(receipt_id)

    async def hosts(self) -> list[ConnectedHost]:
        """See :meth:`ProxyBackend.hosts`."""
        return self.side.upstreams.hosts()
