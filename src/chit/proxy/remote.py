"""The proxy's backend over the daemon's control socket (the default).

:class:`RemoteBackend` is the daemon's socket client (:class:`~chit.engine.remote.
RemoteEngine`: connect or start the daemon, ``hello``, receipts, events, answers,
cancels) plus the ``proxy.*`` methods of :mod:`chit.proxy.protocol`; it also serves what
the daemon sends its way — the server's questions for the host (``proxy.input``) and
progress and notifications — by handing them to the proxy's host object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from pydantic import ValidationError

from chit.engine import rpc
from chit.engine.models import EngineEvent
from chit.engine.remote import RemoteEngine
from chit.engine.start import DaemonUnavailable
from chit.errors import ChitError, ExitCode
from chit.proxy import protocol
from chit.proxy.models import (
    Answer,
    AttachParams,
    ConnectedHost,
    ForwardParams,
    GaveUpParams,
    HostAnswerParams,
    HostParams,
    InputParams,
    NoticeParams,
    NotifyParams,
    ProgressParams,
    QuestionParams,
    ReceiptParams,
    RouteParams,
    ServerRequest,
    StartParams,
    StartReply,
    UpstreamInfo,
)
from chit.proxy.upstream import HostPeer
from chit.receipts import Receipt

log = logging.getLogger("chit.proxy")


class DaemonTooOld(ChitError):
    """The running daemon has no ``proxy.*`` methods."""

    exit_code = ExitCode.UNREACHABLE


class RemoteBackend(RemoteEngine):
    """The proxy's :class:`~chit.proxy.backend.ProxyBackend` through the daemon."""

    peer: HostPeer | None = None
    _lost: anyio.Event | None = None
    _answered_by: dict[int, Callable[[rpc.Frame | None], None]] | None = None

    @property
    def lost(self) -> anyio.Event:
        """Set when the connection to the daemon ends (the daemon stopped or died)."""
        if self._lost is None:
            self._lost = anyio.Event()
        return self._lost

    async def _read(self) -> None:
        try:
            await super()._read()
        finally:
            self.lost.set()
            answered, self._answered_by = self._answered_by or {}, None
            for callback in answered.values():
                _answer(callback, None)

    async def request_soon(
        self,
        name: str,
        params: dict[str, Any],
        callback: Callable[[rpc.Frame | None], None] | None = None,
    ) -> int:
        """Send a request (``params`` as JSON, as its model dumps them); don't wait.

        The reply frame goes to ``callback``, run by the connection's reader (None when
        the connection ends first); it must not block. Without one the reply is dropped.
        Used for ``proxy.request`` on the fast path (the daemon bounds the request
        itself, by the server session's timeouts). :meth:`forget` the returned id to
        drop the reply.

        Raises:
            DaemonUnavailable: the connection is gone.
        """
        if self._gone is not None:
            raise DaemonUnavailable(f"{self._gone}; run the command again")
        request_id = next(self._ids)
        if callback is not None:
            if self._answered_by is None:
                self._answered_by = {}
            self._answered_by[request_id] = callback
        frame = {"jsonrpc": "2.0", "id": request_id, "method": name, "params": params}
        try:
            await self._send_frame_or_raise(rpc.encode(frame))
        except BaseException:
            self.forget(request_id)
            raise
        return request_id

    def forget(self, request_id: int) -> bool:
        """Drop the callback of :meth:`request_soon` (True if it still waited)."""
        return self._answered_by is not None and self._answered_by.pop(request_id, None) is not None

    async def _send_frame_or_raise(self, data: bytes) -> None:
        try:
            await self._lines.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise DaemonUnavailable(f"lost the connection to chit's daemon: {exc}") from None

    def _reply(self, frame: rpc.Frame) -> None:
        if self._answered_by and isinstance(frame.id, int):
            callback = self._answered_by.pop(frame.id, None)
            if callback is not None:
                # Soon, not now: after the tasks started for the frames before it (a
                # notice for the host), as a waiting request would have woken.
                asyncio.get_running_loop().call_soon(_answer, callback, frame)

    async def until_lost(self) -> None:
        """Return when the daemon is gone; raise the one-line error the proxy exits with.

        Raises:
            DaemonUnavailable: always, once the connection ended.
        """
        await self.lost.wait()
        raise DaemonUnavailable(
            "chit's daemon went away; the host should start chit proxy again "
            "(the next one starts a new daemon)"
        )

    async def attach(self, params: AttachParams, peer: HostPeer) -> UpstreamInfo:
        """See :meth:`ProxyBackend.attach`."""
        self.peer = peer
        try:
            info: UpstreamInfo = await self._request("proxy.attach", params)
        except ChitError as exc:
            if "no method 'proxy.attach'" in exc.message:
                raise DaemonTooOld(
                    "the running daemon predates chit proxy: run `chit daemon restart`"
                ) from None
            raise
        return info

    async def set_host(self, params: HostParams) -> None:
        """See :meth:`ProxyBackend.set_host`."""
        await self._request("proxy.host", params)

    async def request(self, p: ForwardParams) -> Answer:
        """See :meth:`ProxyBackend.request`; a cancelled wait cancels it in the daemon."""
        try:
            answer: Answer = await self._request("proxy.request", p)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.cancel_route(p.route)
            raise
        except DaemonUnavailable:
            # The host gets a JSON-RPC error for its request (not a traceback on the
            # proxy's stderr); the proxy itself ends with one line (``until_lost``).
            message = "chit's daemon went away while the request was in flight"
            return Answer(error={"code": INTERNAL_ERROR, "message": message})
        return answer

    async def notify(self, p: NotifyParams) -> None:
        """See :meth:`ProxyBackend.notify`."""
        await self._request("proxy.notify", p)

    async def cancel_route(self, route: str) -> None:
        """See :meth:`ProxyBackend.cancel_route`."""
        await self._request("proxy.cancel", RouteParams(route=route))

    async def start(self, p: StartParams) -> StartReply:
        """See :meth:`ProxyBackend.start` (never cancelled half-way in the daemon)."""
        reply: StartReply = await self._request("proxy.start", p)
        return reply

    async def outcome(self, receipt_id: str) -> Answer:
        """See :meth:`ProxyBackend.outcome`."""
        answer: Answer = await self._request("proxy.outcome", ReceiptParams(receipt_id=receipt_id))
        return answer

    async def question(self, receipt_id: str, key: str) -> ServerRequest:
        """See :meth:`ProxyBackend.question` (a daemon without it: the stored copy)."""
        params = QuestionParams(receipt_id=receipt_id, key=key)
        try:
            found: ServerRequest = await self._request("proxy.question", params)
        except ChitError as exc:
            log.info("the server's request for %s is not at hand: %s", receipt_id, exc.message)
            return ServerRequest()
        return found

    async def answer_for_host(self, receipt_id: str, key: str, reply: dict[str, Any]) -> Receipt:
        """See :meth:`ProxyBackend.answer_for_host`."""
        params = HostAnswerParams(receipt_id=receipt_id, key=key, reply=reply)
        receipt: Receipt = await self._request("proxy.answer", params)
        return receipt

    async def gave_up(self, receipt_id: str, why: str) -> Receipt:
        """See :meth:`ProxyBackend.gave_up`."""
        params = GaveUpParams(receipt_id=receipt_id, why=why)
        receipt: Receipt = await self._request("proxy.gave_up", params)
        return receipt

    async def hosts(self) -> list[ConnectedHost]:
        """See :meth:`ProxyBackend.hosts`."""
        hosts: list[ConnectedHost] = await self._request("proxy.hosts", rpc.NoParams())
        return hosts

    @asynccontextmanager
    async def receipt_events(
        self, receipt_id: str
    ) -> AsyncIterator[ObjectReceiveStream[EngineEvent]]:
        """See :meth:`ProxyBackend.receipt_events`."""
        async with self.events(receipt_id=receipt_id) as stream:
            yield stream

    # --- what the daemon sends --------------------------------------------------------

    def _from_daemon(self, frame: rpc.Frame) -> None:
        if frame.method == protocol.INPUT and frame.id is not None:
            self._tg.start_soon(self._input, frame)
        elif frame.method == protocol.PROGRESS and frame.id is None:
            self._tg.start_soon(self._progress, frame)
        elif frame.method == protocol.NOTICE and frame.id is None:
            self._tg.start_soon(self._notice, frame)
        else:
            super()._from_daemon(frame)

    async def _input(self, frame: rpc.Frame) -> None:
        try:
            params = InputParams.model_validate(frame.params or {})
        except ValidationError:
            await self._send_frame(rpc.error(frame.id, rpc.INVALID_PARAMS, "bad proxy.input"))
            return
        if self.peer is None:
            await self._send_frame(rpc.error(frame.id, rpc.INVALID_REQUEST, "not attached"))
            return
        try:
            result: Any = await self.peer.input(params.route, params.method, params.params)
        except MCPError as exc:
            body = exc.error.model_dump(mode="json", exclude_none=True)
            await self._send_frame({"jsonrpc": "2.0", "id": frame.id, "error": body})
            return
        except Exception as exc:
            message = f"the host did not answer: {type(exc).__name__}"
            await self._send_frame(rpc.error(frame.id, rpc.INTERNAL_ERROR, message))
            return
        await self._send_frame({"jsonrpc": "2.0", "id": frame.id, "result": result})

    async def _progress(self, frame: rpc.Frame) -> None:
        try:
            p = ProgressParams.model_validate(frame.params or {})
        except ValidationError:
            return
        if self.peer is not None:
            await self.peer.progress(p.route, p.progress, p.total, p.message)

    async def _notice(self, frame: rpc.Frame) -> None:
        try:
            p = NoticeParams.model_validate(frame.params or {})
        except ValidationError:
            return
        if self.peer is not None:
            await self.peer.notice(p.method, p.params)


def _answer(callback: Callable[[rpc.Frame | None], None], frame: rpc.Frame | None) -> None:
    try:
        callback(frame)
    except Exception:  # one request's bug must not end the connection
        log.exception("handling the daemon's reply failed")
