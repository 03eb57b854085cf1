"""The control socket's server side: accept, check the peer, dispatch to the engine.

Every connection must be this user's (kernel-reported uid) and must begin with
``hello``. Requests then run concurrently. An *action* (call, answer, cancel, ...) runs
in the daemon's task group, not the connection's: a client that goes away (Ctrl-C)
never cancels a call half-way, which would leave an intent in flight; its reply is
simply dropped. Subscriptions belong to their connection and end with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup
from pydantic import BaseModel, ValidationError

from chit.daemon.connection import Connection
from chit.daemon.peer import peer_of
from chit.engine import rpc
from chit.engine.local import LocalEngine
from chit.errors import ChitError
from chit.redaction import redact

log = logging.getLogger("chit.daemon")

HELLO_WAIT_S = 10.0
"""A connection that says nothing for this long after connecting is closed."""

Handler = Callable[[Any, Connection], Awaitable[Any]]
Inline = Callable[[rpc.Frame, Connection], bool]
"""Serves a request in the connection's reader, without a task: True if it took it (it
answers later with ``Connection.send_nowait``); False: the method's handler serves it."""


class ControlServer:
    """Serves one LocalEngine on a listener until the daemon stops."""

    def __init__(
        self,
        engine: LocalEngine,
        hello: Callable[[], rpc.HelloResult],
        status: Callable[[int], Awaitable[rpc.DaemonStatus]],
        stop: anyio.Event,
        actions: TaskGroup,
    ) -> None:
        """Dispatch to ``engine``; ``actions`` is the daemon-wide group actions run in."""
        self.engine = engine
        self._hello = hello
        self._status = status
        self._stop = stop
        self._actions = actions
        self.clients = 0
        self._numbers = 0
        self._handlers: dict[str, Handler] = {
            "call": self._call,
            "answer": self._answer,
            "cancel": self._cancel,
            "accept": self._accept,
            "reject": self._reject,
            "reopen": self._reopen,
            "protocol.log": self._protocol_log,
            "receipt": self._receipt,
            "tools": self._tools,
            "servers": self._servers,
            "reconcile": self._reconcile,
            "intent.retry": self._retry,
            "intent.abandon": self._abandon,
            "events.subscribe": self._subscribe,
            "events.unsubscribe": self._unsubscribe,
            "daemon.status": self._daemon_status,
            "daemon.stop": self._daemon_stop,
        }
        self._inline: dict[str, Inline] = {}

    def extend(self, handlers: dict[str, Handler], inline: dict[str, Inline] | None = None) -> None:
        """Serve more methods (their models are in ``rpc.METHODS``; ``chit proxy``'s).

        ``inline`` may serve some of them first, without a task per request.
        """
        self._handlers.update(handlers)
        self._inline.update(inline or {})

    async def serve(self, listener: SocketListener) -> None:
        """Accept connections until cancelled."""
        async with listener:
            await listener.serve(self._connection)

    # --- one connection ---------------------------------------------------------------

    async def _connection(self, stream: SocketStream) -> None:
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)
            try:
                peer = peer_of(raw)
            except OSError as exc:
                log.warning("refused a connection: cannot tell who it is (%s)", exc)
                return
            if peer.uid != os.getuid():
                log.warning("refused a connection from uid %s (pid %s)", peer.uid, peer.pid)
                return
            self._numbers += 1
            self.clients += 1
            try:
                async with anyio.create_task_group() as tg:
                    conn = Connection(stream, tg, self._numbers)
                    try:
                        await self._read(conn)
                    finally:
                        conn.close()
                    tg.cancel_scope.cancel()
            finally:
                self.clients -= 1

    async def _read(self, conn: Connection) -> None:
        while True:
            try:
                if conn.greeted:
                    line = await conn.lines.receive_line()
                else:
                    with anyio.fail_after(HELLO_WAIT_S):
                        line = await conn.lines.receive_line()
            except TimeoutError:
                log.info("client %d said nothing; closed", conn.number)
                return
            except anyio.DelimiterNotFound:
                log.warning(
                    "client %d sent a frame over %d bytes; closed", conn.number, rpc.MAX_FRAME
                )
                await conn.send(rpc.error(None, rpc.INVALID_REQUEST, "frame too large"))
                return
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
                return
            try:
                frame = rpc.decode(line)
            except ValueError as exc:
                await conn.send(rpc.error(None, rpc.PARSE_ERROR, str(exc)[:200]))
                continue
            if frame.method is None and frame.id is not None:
                conn.resolve(frame)  # the client's answer to a request of the daemon
                continue
            if frame.method is None or frame.id is None:
                continue  # a notification: nothing the daemon expects
            if not conn.greeted:
                if frame.method != "hello":
                    await conn.send(rpc.error(frame.id, rpc.HELLO_REQUIRED, "say hello first"))
                    return
                await self._dispatch(conn, frame)
                continue
            inline = self._inline.get(frame.method)
            if (
                inline is not None
                and conn.compatible
                and await self._inline_took(inline, conn, frame)
            ):
                continue
            if frame.method in ("events.subscribe", "events.unsubscribe", "daemon.status"):
                conn.tg.start_soon(self._dispatch, conn, frame)
            else:
                self._actions.start_soon(self._dispatch, conn, frame)

    @staticmethod
    async def _inline_took(inline: Inline, conn: Connection, frame: rpc.Frame) -> bool:
        try:
            return inline(frame, conn)
        except Exception as exc:  # a bug: the client gets one line, the log the details
            log.exception("request %s failed", frame.method)
            message = redact(f"internal error in chit's daemon: {type(exc).__name__}: {exc}")
            await conn.send(rpc.error(frame.id, rpc.INTERNAL_ERROR, message[:300]))
            return True

    async def _dispatch(self, conn: Connection, frame: rpc.Frame) -> None:
        method = rpc.METHODS.get(frame.method or "")
        if method is None:
            await conn.send(
                rpc.error(frame.id, rpc.METHOD_NOT_FOUND, f"no method {frame.method!r}")
            )
            return
        try:
            params = method.params.model_validate(frame.params or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}"
                for e in exc.errors()
            )
            await conn.send(rpc.error(frame.id, rpc.INVALID_PARAMS, problems[:500]))
            return
        try:
            if frame.method == "hello":
                value: Any = self._hello_for(conn, params)
            elif not conn.compatible:
                raise ChitError("protocol mismatch: run `chit daemon restart`")
            else:
                value = await self._handlers[method.name](params, conn)
        except ChitError as exc:
            await conn.send(rpc.chit_error(frame.id, exc))
            return
        except Exception as exc:  # a bug: the client gets one line, the log the details
            log.exception("request %s failed", method.name)
            await conn.send(
                rpc.error(
                    frame.id,
                    rpc.INTERNAL_ERROR,
                    # redacted here: only this process knows the handles it opened
                    redact(f"internal error in chit's daemon: {type(exc).__name__}: {exc}")[:300]
                    + " (see logs/daemon.log)",
                    {"exit_code": 1, "type": type(exc).__name__},
                )
            )
            return
        await conn.send(rpc.result(frame.id, method, value))

    def _hello_for(self, conn: Connection, params: BaseModel) -> rpc.HelloResult:
        assert isinstance(params, rpc.HelloParams)
        conn.greeted = True
        conn.compatible = params.protocol == rpc.PROTOCOL_VERSION
        if not conn.compatible:
            log.warning(
                "client %d speaks protocol %d (chit %s); this daemon speaks %d",
                conn.number,
                params.protocol,
                params.chit_version,
                rpc.PROTOCOL_VERSION,
            )
        return self._hello()

    # --- methods ------------------------------------------------------------------------

    async def _call(self, p: rpc.CallParams, _: Connection) -> Any:
        return await self.engine.call(
            p.server,
            p.tool,
            p.arguments,
            purpose=p.purpose,
            work_ref=p.work_ref,
            ttl_ms=p.ttl_ms,
            accept_if=p.accept_if,
        )

    async def _answer(self, p: rpc.AnswerParams, _: Connection) -> Any:
        return await self.engine.answer(
            p.receipt_id, p.key, p.content, decline=p.decline, cancel=p.cancel
        )

    async def _cancel(self, p: rpc.ReceiptParams, _: Connection) -> Any:
        return await self.engine.cancel(p.receipt_id)

    async def _accept(self, p: rpc.DecideParams, _: Connection) -> Any:
        return await self.engine.accept(p.receipt_id, p.why)

    async def _reject(self, p: rpc.DecideParams, _: Connection) -> Any:
        return await self.engine.reject(p.receipt_id, p.why or "")

    async def _reopen(self, p: rpc.ReceiptParams, _: Connection) -> Any:
        return await self.engine.reopen(p.receipt_id)

    async def _protocol_log(self, p: rpc.ProtocolLogParams, _: Connection) -> Any:
        return await self.engine.protocol_log(p.server, limit=p.limit)

    async def _receipt(self, p: rpc.ReceiptParams, _: Connection) -> Any:
        return await self.engine.receipt(p.receipt_id)

    async def _tools(self, p: rpc.ToolsParams, _: Connection) -> Any:
        return await self.engine.tools(p.server, timeout=p.timeout)

    async def _servers(self, _p: rpc.NoParams, _: Connection) -> Any:
        return await self.engine.servers()

    async def _reconcile(self, _p: rpc.NoParams, _: Connection) -> Any:
        return await self.engine.reconcile_now()

    async def _retry(self, p: rpc.RetryParams, _: Connection) -> Any:
        return await self.engine.retry_intent(
            p.request_key, p.arguments, ttl_ms=p.ttl_ms, accept_if=p.accept_if
        )

    async def _abandon(self, p: rpc.IntentParams, _: Connection) -> Any:
        await self.engine.abandon_intent(p.request_key)

    async def _daemon_status(self, _p: rpc.NoParams, _: Connection) -> Any:
        return await self._status(self.clients)

    async def _daemon_stop(self, _p: rpc.NoParams, _: Connection) -> Any:
        log.info("stop requested by a client")
        self._stop.set()

    async def _subscribe(self, p: rpc.SubscribeParams, conn: Connection) -> Any:
        if p.subscription in conn.subscriptions:
            raise ChitError(f"subscription {p.subscription!r} exists already")
        rid = None
        if p.receipt_id is not None:
            rid = (await self.engine.receipt(p.receipt_id)).receipt_id
        scope: anyio.CancelScope = await conn.tg.start(self._pump, conn, p, rid)
        conn.subscriptions[p.subscription] = scope
        return rpc.SubscribeResult(receipt_id=rid)

    async def _pump(
        self,
        conn: Connection,
        p: rpc.SubscribeParams,
        rid: str | None,
        *,
        task_status: anyio.abc.TaskStatus[anyio.CancelScope],
    ) -> None:
        with anyio.CancelScope() as scope:
            async with self.engine.events(receipt_id=rid, since=p.since) as stream:
                task_status.started(scope)
                async for event in stream:
                    await conn.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "event",
                            "params": {
                                "subscription": p.subscription,
                                "event": event.model_dump(mode="json"),
                            },
                        }
                    )
                    if conn.closed:
                        return
        conn.subscriptions.pop(p.subscription, None)

    async def _unsubscribe(self, p: rpc.UnsubscribeParams, conn: Connection) -> Any:
        scope = conn.subscriptions.pop(p.subscription, None)
        if scope is not None:
            scope.cancel()


__all__ = ["Connection", "ControlServer", "Handler", "Inline"]
