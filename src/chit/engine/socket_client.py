"""The daemon's socket client: one connection, its requests, replies and event streams.

``async with SocketClient.open(home) as client:`` connects (starting the daemon when
none answers, see :mod:`chit.engine.start`), says ``hello`` and checks the protocol
version. One reader task routes responses to their callers and event notifications to
their subscriptions. When the daemon goes away, every waiting call fails with one line
(exit 6) instead of hanging. :class:`chit.engine.remote.RemoteEngine` serves the
``Engine`` protocol on it, ``chit proxy``'s backend its own methods, and
:mod:`chit.engine.daemon_control` asks the daemon about itself.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Self

import anyio
from anyio.abc import ObjectReceiveStream, SocketAttribute, SocketStream, TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from pydantic import BaseModel, ValidationError

from chit import __version__
from chit.engine import rpc
from chit.engine._groups import sole_error
from chit.engine.lines import LineSocket
from chit.engine.models import EngineEvent, Resync
from chit.engine.start import DaemonUnavailable, connect_or_start
from chit.errors import ChitError, ExitCode
from chit.home import Home

EVENT_BUFFER = 1024
"""Events a subscription holds before it lags (its reader is then told to re-read)."""


class ProtocolMismatch(ChitError):
    """The running daemon speaks another protocol version."""

    exit_code = ExitCode.UNREACHABLE


@dataclass(eq=False)
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    frame: rpc.Frame | None = None


@dataclass(eq=False)
class _Subscription:
    send: MemoryObjectSendStream[EngineEvent]
    lagged: bool = False


class SocketClient:
    """One greeted connection to the home's daemon: requests and event subscriptions."""

    def __init__(self, stream: SocketStream, tg: TaskGroup) -> None:
        """Use :meth:`open`."""
        self._stream = stream
        self._lines = LineSocket(stream.extra(SocketAttribute.raw_socket), rpc.MAX_FRAME)
        self._tg = tg
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        self._gone: str | None = None
        self.hello: rpc.HelloResult | None = None

    @classmethod
    @asynccontextmanager
    async def open(
        cls, home: Home, *, start: bool = True, client: str = "cli"
    ) -> AsyncIterator[Self]:
        """Connect to (or start) the home's daemon and greet it.

        Raises:
            DaemonUnavailable: none answers (and ``start`` is False) or it did not start.
            ProtocolMismatch: the daemon is another version: ``chit daemon restart``.
        """
        stream = await connect_or_start(home, start=start)
        try:
            async with stream, anyio.create_task_group() as tg:
                connection = cls(stream, tg)
                tg.start_soon(connection._read)
                try:
                    await connection._greet(client)
                    yield connection
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise sole_error(group) from None

    async def _greet(self, client: str) -> None:
        params = rpc.HelloParams(
            protocol=rpc.PROTOCOL_VERSION, chit_version=__version__, client=client
        )
        hello = await self._request("hello", params)
        assert isinstance(hello, rpc.HelloResult)
        if hello.protocol != rpc.PROTOCOL_VERSION:
            raise ProtocolMismatch(
                f"the running daemon (chit {hello.chit_version}, pid {hello.pid}) speaks "
                f"protocol {hello.protocol}, this chit {__version__} speaks "
                f"{rpc.PROTOCOL_VERSION}: run `chit daemon restart`"
            )
        self.hello = hello

    # --- the wire -------------------------------------------------------------------

    async def _read(self) -> None:
        why = "chit's daemon closed the connection"
        try:
            while True:
                line = await self._lines.receive_line()
                try:
                    frame = rpc.decode(line)
                except ValueError:
                    continue
                if frame.method == "event":
                    self._deliver(frame)
                elif isinstance(frame.id, int) and frame.id in self._waiting:
                    waiter = self._waiting.pop(frame.id)
                    waiter.frame = frame
                    waiter.done.set()
                elif frame.method is not None:
                    self._from_daemon(frame)
                else:
                    self._reply(frame)
        except anyio.DelimiterNotFound:
            why = "chit's daemon sent a frame over the size limit"
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self._gone = why
            self._lines.detach()
            for waiter in self._waiting.values():
                waiter.done.set()
            self._waiting.clear()
            for sub in self._subscriptions.values():
                sub.send.close()

    def _reply(self, frame: rpc.Frame) -> None:
        """A response no caller waits for (``chit proxy`` answers some by callback)."""

    def _from_daemon(self, frame: rpc.Frame) -> None:
        """A request or notification of the daemon other than an event (none here).

        ``chit proxy``'s client overrides it: the daemon asks it what a server asks
        its host. Must not block the reader (start a task in ``self._tg``).
        """
        if frame.id is not None:
            self._tg.start_soon(
                self._send_frame, rpc.error(frame.id, rpc.METHOD_NOT_FOUND, "not served here")
            )

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        """Send one frame to the daemon (dropped when the connection is gone)."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self._lines.send(rpc.encode(frame))  # whole frames, in order

    def _deliver(self, frame: rpc.Frame) -> None:
        try:
            params = rpc.EventParams.model_validate(frame.params or {})
        except ValidationError:
            return
        sub = self._subscriptions.get(params.subscription)
        if sub is None:
            return
        try:
            if sub.lagged:
                sub.send.send_nowait(Resync(cursor=0, reason="events were dropped: re-read"))
                sub.lagged = False
            sub.send.send_nowait(params.event)
        except anyio.WouldBlock:
            sub.lagged = True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._subscriptions.pop(params.subscription, None)

    async def _request(self, name: str, params: BaseModel, timeout_s: float | None = None) -> Any:
        method = rpc.METHODS[name]
        wait = max(method.timeout_s, timeout_s or 0.0)
        if self._gone is not None:
            raise DaemonUnavailable(f"{self._gone}; run the command again")
        request_id = next(self._ids)
        waiter = _Waiter()
        self._waiting[request_id] = waiter
        try:
            await self._lines.send(rpc.encode(rpc.request(request_id, name, params)))
            with anyio.fail_after(wait):
                await waiter.done.wait()
        except TimeoutError:
            raise DaemonUnavailable(
                f"chit's daemon did not answer {name!r} within {wait:g} s"
            ) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise DaemonUnavailable(f"lost the connection to chit's daemon: {exc}") from None
        finally:
            self._waiting.pop(request_id, None)
        frame = waiter.frame
        if frame is None:
            raise DaemonUnavailable(
                f"{self._gone or 'chit daemon went away'} while {name!r} was in flight; "
                "see logs/daemon.log, then check with `chit receipts` / `chit intents`"
            )
        if frame.error is not None:
            rpc.raise_error(frame.error)
        try:
            return method.result.validate_python(frame.result)
        except ValidationError as exc:
            raise ChitError(
                f"chit's daemon sent an unreadable {name!r} reply ({exc.error_count()} "
                "problems); run `chit daemon restart`",
                exit_code=ExitCode.INTERNAL,
            ) from None

    # --- event subscriptions ---------------------------------------------------------

    def events(
        self, *, receipt_id: str | None = None, since: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[EngineEvent]]:
        """See ``Engine.events``; the stream ends when the daemon goes away."""
        return self._events(receipt_id, since)

    @asynccontextmanager
    async def _events(
        self, receipt_id: str | None, since: int | None
    ) -> AsyncIterator[ObjectReceiveStream[EngineEvent]]:
        name = f"s{next(self._ids)}"
        send, receive = anyio.create_memory_object_stream[EngineEvent](EVENT_BUFFER)
        self._subscriptions[name] = _Subscription(send)
        try:
            await self._request(
                "events.subscribe",
                rpc.SubscribeParams(subscription=name, receipt_id=receipt_id, since=since),
            )
            async with receive:
                yield receive
        finally:
            self._subscriptions.pop(name, None)
            send.close()
            if self._gone is None:
                # The daemon may go away meanwhile: then there is nothing to undo.
                with anyio.move_on_after(5, shield=True), contextlib.suppress(ChitError):
                    await self._request(
                        "events.unsubscribe", rpc.UnsubscribeParams(subscription=name)
                    )


__all__ = ["EVENT_BUFFER", "ProtocolMismatch", "SocketClient"]
