"""The daemon's ``proxy.*`` methods: ``chit proxy`` processes attached to its sessions.

Each proxy connection attaches once (``proxy.attach``) and is then a
:class:`~chit.proxy.upstream.HostPeer` of the engine: what the server asks or notifies
for that proxy's host travels back on the same connection (``proxy.input`` requests,
``proxy.progress`` / ``proxy.notice`` notifications). When the connection ends the
attachment goes with it (its forwarded requests in flight are cancelled; tasks stay).
The models and the method table are in :mod:`chit.proxy.protocol`.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, ErrorData
from pydantic import ValidationError

from chit.daemon.server import Connection, ControlServer
from chit.engine import rpc
from chit.engine.local import LocalEngine
from chit.errors import ChitError
from chit.proxy import protocol
from chit.proxy.backend import EngineSide
from chit.proxy.inline import forward_soon
from chit.proxy.lost import end_orphans
from chit.proxy.models import (
    Answer,
    AttachParams,
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
    StartParams,
)
from chit.proxy.upstream import Attachment

log = logging.getLogger("chit.daemon")


class SocketPeer:
    """A proxy reached over its control connection (implements ``HostPeer``)."""

    def __init__(self, conn: Connection) -> None:
        """Talk to the proxy on ``conn``."""
        self.conn = conn

    async def input(self, route: str, method: str, params: dict[str, Any] | None) -> Any:
        """Ask the proxy's host; the host's result, or the host's error as ``MCPError``."""
        body = InputParams(route=route, method=method, params=params).model_dump(mode="json")
        try:
            frame = await self.conn.request(protocol.INPUT, body, protocol.INPUT_TIMEOUT_S)
        except (TimeoutError, OSError, Exception) as exc:
            raise MCPError(
                code=INTERNAL_ERROR, message=f"the host did not answer ({type(exc).__name__})"
            ) from exc
        if frame.error is not None:
            raise MCPError.from_error_data(ErrorData.model_validate(frame.error))
        return frame.result

    async def progress(
        self, route: str, progress: float, total: float | None, message: str | None
    ) -> None:
        """Relay progress to the proxy."""
        params = ProgressParams(route=route, progress=progress, total=total, message=message)
        await self._notify(protocol.PROGRESS, params.model_dump(mode="json"))

    async def notice(self, method: str, params: dict[str, Any] | None) -> None:
        """Relay a server notification to the proxy."""
        body = NoticeParams(method=method, params=params).model_dump(mode="json")
        await self._notify(protocol.NOTICE, body)

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        await self.conn.send({"jsonrpc": "2.0", "method": method, "params": params})


class ProxyMethods:
    """The handlers of ``proxy.*`` on one daemon."""

    def __init__(self, engine: LocalEngine) -> None:
        """Serve proxies on ``engine``'s sessions."""
        self.side = EngineSide(engine)
        self._attached: dict[int, Attachment] = {}

    def handlers(self) -> dict[str, Any]:
        """Method name → handler ``(params, conn)``."""
        return {
            "proxy.attach": self.attach,
            "proxy.host": self.host,
            "proxy.request": self.request,
            "proxy.notify": self.notify,
            "proxy.cancel": self.cancel,
            "proxy.start": self.start,
            "proxy.outcome": self.outcome,
            "proxy.question": self.question,
            "proxy.answer": self.answer,
            "proxy.gave_up": self.gave_up,
            "proxy.hosts": self.hosts,
        }

    def _att(self, conn: Connection) -> Attachment:
        att = self._attached.get(conn.number)
        if att is None:
            raise ChitError("this connection has not attached to a server (proxy.attach)")
        return att

    async def attach(self, p: AttachParams, conn: Connection) -> Any:
        """Attach the connection's proxy to a server (again: replaces the first)."""
        old = self._attached.pop(conn.number, None)
        if old is not None:
            self.side.upstreams.detach(old)
        att, info = await self.side.upstreams.attach(p, SocketPeer(conn))
        self._attached[conn.number] = att

        def gone() -> None:
            if self._attached.get(conn.number) is att:
                del self._attached[conn.number]
            self.side.upstreams.detach(att)

        conn.on_close.append(gone)
        return info

    async def host(self, p: HostParams, conn: Connection) -> Any:
        """The proxy's host introduced itself."""
        self.side.upstreams.set_host(self._att(conn), p)

    async def request(self, p: ForwardParams, conn: Connection) -> Any:
        """Forward one request of the host (its answer is the server's JSON, sent unread)."""
        answer = await self.side.upstreams.forward(self._att(conn), p)
        return rpc.Raw({"result": answer.result, "error": answer.error})

    def request_inline(self, frame: rpc.Frame, conn: Connection) -> bool:
        """``proxy.request`` without a task where it can be (``chit.proxy.inline``)."""
        att = self._attached.get(conn.number)
        if att is None:
            return False
        try:
            p = ForwardParams.model_validate(frame.params or {})
        except ValidationError:
            return False  # the handler says what is wrong
        method = rpc.METHODS["proxy.request"]
        request_id = frame.id

        def reply(answer: Answer) -> None:
            body = rpc.Raw({"result": answer.result, "error": answer.error})
            conn.send_nowait(rpc.result(request_id, method, body))

        return forward_soon(self.side.upstreams, att, p, reply)

    async def notify(self, p: NotifyParams, conn: Connection) -> Any:
        """Forward one notification of the host."""
        await self.side.upstreams.notify(self._att(conn), p)

    async def cancel(self, p: RouteParams, conn: Connection) -> Any:
        """The host cancelled a forwarded request."""
        self.side.upstreams.cancel(self._att(conn), p.route)

    async def start(self, p: StartParams, conn: Connection) -> Any:
        """A call that may become a task (intent first)."""
        return await self.side.starts.start(self._att(conn), p)

    async def outcome(self, p: ReceiptParams, conn: Connection) -> Any:
        """The full result of a finished task."""
        del conn
        return await self.side.starts.outcome(p.receipt_id)

    async def question(self, p: QuestionParams, conn: Connection) -> Any:
        """The server's own request behind a question, redacted (``chit.proxy.sampled``)."""
        del conn
        return await self.side.question(p.receipt_id, p.key)

    async def answer(self, p: HostAnswerParams, conn: Connection) -> Any:
        """The host's reply to a prompt, passed on as given."""
        del conn
        return await self.side.starts.answer(p.receipt_id, p.key, p.reply)

    async def gave_up(self, p: GaveUpParams, conn: Connection) -> Any:
        """The host stopped waiting for a task."""
        return await self.side.starts.gave_up(self._att(conn), p.receipt_id, p.why)

    async def hosts(self, _p: Any, conn: Connection) -> Any:
        """The hosts attached right now."""
        del conn
        return self.side.upstreams.hosts()


def install(server: ControlServer, engine: LocalEngine) -> ProxyMethods:
    """Serve ``proxy.*`` on ``server`` (the method table is ``chit.proxy.protocol``)."""
    methods = ProxyMethods(engine)
    # The questions an earlier daemon held died with it: say so on their receipts.
    end_orphans(engine.supervisor)
    server.extend(methods.handlers(), {"proxy.request": methods.request_inline})
    return methods
