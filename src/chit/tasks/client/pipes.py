"""A stdio server's pipes on the event loop: no reader or writer task between them.

The SDK's ``stdio_client`` bridges the server's pipes to the session through two tasks
and two memory streams: every message sent is handed to a writer task, every line read
is parsed by a reader task and handed on to the session's receive loop. In chit's
daemon, where every ``chit proxy`` call crosses one server session, those hand-offs
were a large share of the work per call (``benchmarks/proxy.py``). Here the same
streams are served straight from the pipes (POSIX, asyncio):

* a message sent is written to the server's stdin inline, by the task that sends it
  (what the pipe cannot take at once is written when it can, in order);
* the server's stdout is read by an event-loop callback; the session's receive loop
  takes the parsed messages from a queue;
* :meth:`ServerPipes.request` sends a request as JSON and waits for the answer's JSON:
  the reader hands the response to the waiting request directly, without the SDK's
  models, request bookkeeping or receive loop (``chit proxy``'s forwarded requests,
  whose answers are passed on unread). Its ids come from the session's own counter,
  so they never meet the session's requests, and a response is settled in the order
  the server sent it (after the messages before it).

Process handling is the SDK's: a new session (process group), the SDK's default
environment plus the server's, stderr to the server's log; on close, stdin is closed,
the server gets two seconds to exit, then its process group is sent SIGTERM and, two
seconds later, SIGKILL. Lines on stdout that are not MCP are counted and logged as
:mod:`chit.tasks.client.noise` describes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from chit.tasks.client.noise import StdoutNoise
from chit.tasks.client.tap import Tap

log = logging.getLogger("chit.tasks.client.stdio")

CHUNK = 1 << 16
QUEUE_HIGH = 256
"""Messages the session has not taken yet before the reader pauses (back-pressure)."""
EXIT_WAIT_S = 2.0
KILL_WAIT_S = 2.0
FLUSH_WAIT_S = 0.5
CANCEL_WRITE_S = 5.0
_POLL_S = 0.01


def available() -> bool:
    """True where this transport runs: POSIX, on asyncio."""
    if sys.platform == "win32":
        return False
    try:
        asyncio.get_running_loop()  # none under trio
    except RuntimeError:
        return False
    return True


class _Reply:
    """A response to a :meth:`ServerPipes.request`, queued behind earlier messages."""

    __slots__ = ("future", "outcome")

    def __init__(self, future: asyncio.Future[Any], outcome: Any) -> None:
        self.future = future
        self.outcome = outcome

    def settle(self) -> None:
        if not self.future.done():
            self.future.set_result(self.outcome)


_CLOSED = object()
"""What a waiting request gets when the connection ends."""
_TIMED_OUT = object()
"""What a waiting request gets when its timeout passes."""


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(_TIMED_OUT)


class ServerPipes:
    """One server process and its pipes (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes], noise: StdoutNoise, tap: Tap | None) -> None:
        """Serve ``proc``'s pipes on the running loop."""
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.noise = noise
        self.tap = tap
        self._loop = asyncio.get_running_loop()
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._buffer = bytearray()
        self._queue: deque[Any] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._reading = False
        self.eof = False
        self._draining = False
        self._pending = bytearray()
        self._drained: asyncio.Future[None] | None = None
        self._in_closed = False
        self._raw: dict[Any, asyncio.Future[Any]] = {}
        self._resume_reading()

    # --- reading ----------------------------------------------------------------------

    def _resume_reading(self) -> None:
        if not self._reading and not self.eof:
            self._loop.add_reader(self._out, self._readable)
            self._reading = True

    def _pause_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._out)
            self._reading = False

    def _readable(self) -> None:
        try:
            chunk = os.read(self._out, CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._end()
            return
        if self._draining:
            return  # closing: read only so the server is never stuck writing
        buffer = self._buffer
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self._line(line)
        if len(self._queue) >= QUEUE_HIGH:
            self._pause_reading()

    def _line(self, line: bytes) -> None:
        if self._raw and self._reply(line):
            return
        try:
            item: Any = SessionMessage(
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            )
        except ValueError as exc:  # pydantic's ValidationError is one
            self.noise.record(line.decode("utf-8", "replace"))
            item = exc  # the session sees it, as with the SDK's transport
        self._push(item)

    def _reply(self, line: bytes) -> bool:
        """Settle a waiting :meth:`request` with ``line`` if it is its response."""
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" in msg:
            return False
        rid = msg.get("id")
        if isinstance(rid, bool) or not isinstance(rid, int | str):
            return False
        future = self._raw.get(coerce_request_id(rid))
        if future is None:
            return False
        if isinstance(msg.get("result"), dict) and "error" not in msg:
            outcome: Any = ("result", msg["result"])
        elif isinstance(msg.get("error"), dict) and "result" not in msg:
            try:
                outcome = ("error", types.ErrorData.model_validate(msg["error"]))
            except ValidationError:
                return False  # not a response: the session's path judges it
        else:
            return False
        self._raw.pop(coerce_request_id(rid), None)
        if self.tap is not None:
            self._observe("received", msg)
        reply = _Reply(future, outcome)
        if self._queue:
            self._push(reply)  # after the messages the server sent before it
        else:
            reply.settle()
        return True

    def _push(self, item: Any) -> None:
        self._queue.append(item)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _end(self) -> None:
        """The server closed its stdout (exited): the session ends, requests fail."""
        self._pause_reading()
        self.eof = True
        for future in self._raw.values():
            if not future.done():
                future.set_result(_CLOSED)
        self._raw.clear()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message of the server for the session (its receive loop).

        Raises:
            anyio.EndOfStream: the server closed its stdout.
        """
        while True:
            while self._queue:
                item = self._queue.popleft()
                if not self._reading and len(self._queue) < QUEUE_HIGH // 2:
                    self._resume_reading()
                if isinstance(item, _Reply):
                    item.settle()
                    continue
                return item  # type: ignore[no-any-return]
            if self.eof:
                raise anyio.EndOfStream
            self._wake = self._loop.create_future()
            try:
                await self._wake
            finally:
                self._wake = None

    # --- writing ----------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Write whole lines to the server's stdin, in order; wait while the pipe is full.

        Raises:
            anyio.BrokenResourceError: the server closed its stdin (or exited).
        """
        if self._in_closed:
            raise anyio.BrokenResourceError
        if not self._pending:
            try:
                written = os.write(self._in, data)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError:
                self._broken()
                raise anyio.BrokenResourceError from None
            if written == len(data):
                return
            data = data[written:]
            self._loop.add_writer(self._in, self._writable)
            self._drained = self._loop.create_future()
        self._pending += data
        drained = self._drained
        assert drained is not None
        await asyncio.shield(drained)
        if self._in_closed and drained.result() is _CLOSED:
            raise anyio.BrokenResourceError

    def _writable(self) -> None:
        try:
            written = os.write(self._in, self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._broken()
            return
        del self._pending[:written]
        if not self._pending:
            self._loop.remove_writer(self._in)
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    def _broken(self) -> None:
        """Stdin is gone: writers fail, and the session sees the connection end."""
        self._fail_writers()
        self._end()

    def _fail_writers(self) -> None:
        if not self._in_closed:
            self._in_closed = True
            with suppress(Exception):
                self._loop.remove_writer(self._in)
        self._pending.clear()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(_CLOSED)  # type: ignore[arg-type]
        self._drained = None

    async def send(self, message: SessionMessage) -> None:
        """Send one of the session's messages (the SDK's serialisation)."""
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.write((text + "\n").encode("utf-8"))

    # --- requests answered as JSON ----------------------------------------------------

    async def request(
        self, request_id: int, method: str, params: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        """Send a request as JSON; the result as the server sent it.

        The same contract as the SDK's ``send_raw_request``: a courtesy
        ``notifications/cancelled`` when the caller gives up or the timeout passes.

        Raises:
            MCPError: the server's error; ``REQUEST_TIMEOUT`` after ``timeout`` seconds;
                ``CONNECTION_CLOSED`` when the server went away.
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        if self.eof:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        future: asyncio.Future[Any] = self._loop.create_future()
        key = coerce_request_id(request_id)
        self._raw[key] = future
        written = False
        try:
            if self.tap is not None:
                self._observe("sent", message)
            try:
                written = True
                await self.write(line.encode("utf-8"))
            except anyio.BrokenResourceError:
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            # A timer, not a cancel scope: one per call was measurable.
            timer = self._loop.call_later(timeout, _expire, future)
            try:
                outcome = await future
            finally:
                timer.cancel()
        except anyio.get_cancelled_exc_class():
            if written:
                with anyio.move_on_after(CANCEL_WRITE_S, shield=True):
                    await self._cancel(request_id, "caller cancelled")
            raise
        finally:
            self._raw.pop(key, None)
        if outcome is _TIMED_OUT:
            with anyio.move_on_after(CANCEL_WRITE_S):
                await self._cancel(request_id, f"timed out after {timeout}s")
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out")
        if outcome is _CLOSED:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        kind, body = outcome
        if kind == "error":
            raise MCPError(code=body.code, message=body.message, data=body.data)
        return body  # type: ignore[no-any-return]

    async def _cancel(self, request_id: int, reason: str) -> None:
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        if self.tap is not None:
            self._observe("sent", message)
        with suppress(anyio.BrokenResourceError):
            await self.write((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def _observe(self, direction: Any, message: dict[str, Any]) -> None:
        assert self.tap is not None
        try:
            self.tap(direction, message)
        except Exception:  # an observer never breaks the connection
            log.warning("protocol tap raised", exc_info=True)

    # --- closing ----------------------------------------------------------------------

    async def close(self) -> None:
        """Flush, close stdin, let the server exit; then end its process group."""
        with anyio.CancelScope(shield=True):
            if self._pending and not self._in_closed:
                drained = self._drained
                with anyio.move_on_after(FLUSH_WAIT_S):
                    if drained is not None:
                        await asyncio.shield(drained)
            self._draining = True  # keep reading: a server stuck writing cannot exit
            self._resume_reading()
            self._fail_writers()
            for future in self._raw.values():
                if not future.done():
                    future.set_result(_CLOSED)
            self._raw.clear()
            for item in self._queue:  # answers the session's loop will not reach now
                if isinstance(item, _Reply):
                    item.settle()
            with suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]
            if not await self._exited(EXIT_WAIT_S):
                await self._terminate()
                if not await self._exited(KILL_WAIT_S):
                    log.warning(
                        "MCP server process %d is still alive after SIGKILL; abandoning it",
                        self.proc.pid,
                    )
            self._pause_reading()
            with suppress(OSError):
                self.proc.stdout.close()  # type: ignore[union-attr]

    async def _exited(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while self.proc.poll() is None:
                await anyio.sleep(_POLL_S)
            return True
        return False

    async def _terminate(self) -> None:
        """SIGTERM the server's process group; SIGKILL what is left after two seconds."""
        pgid = self.proc.pid  # the leader of its own session (start_new_session)
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        except PermissionError:
            log.warning("no permission to signal some of process group %d", pgid)
        with anyio.move_on_after(KILL_WAIT_S):
            while _group_alive(pgid):
                self.proc.poll()  # reap the leader, or its zombie keeps the group alive
                await anyio.sleep(_POLL_S)
            return
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class _Read:
    """The session's read stream: the server's messages, from :class:`ServerPipes`."""

    def __init__(self, pipes: ServerPipes) -> None:
        self.pipes = pipes
        self.closed = False

    async def receive(self) -> SessionMessage | Exception:
        if self.closed:
            raise anyio.ClosedResourceError
        return await self.pipes.receive()

    def __aiter__(self) -> _Read:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _Read:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Write:
    """The session's write stream: each message written to the server's stdin inline."""

    def __init__(self, pipes: ServerPipes) -> None:
        self.pipes = pipes
        self.closed = False

    async def send(self, message: SessionMessage) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        await self.pipes.send(message)

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _Write:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _spawn(
    command: str,
    args: list[str],
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: Any,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | (env or {}),
        cwd=cwd,
        start_new_session=True,
    )


@asynccontextmanager
async def pipe_stdio(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: Any,
    noise: StdoutNoise,
    tap: Tap | None = None,
    on_pipes: Callable[[ServerPipes | None], None] | None = None,
) -> AsyncIterator[tuple[_Read, _Write]]:
    """Start the server and yield the session's ``(read, write)`` streams.

    ``tap`` sees what :meth:`ServerPipes.request` sends and receives (the session's own
    messages are tapped on its streams); ``on_pipes`` is told the pipes (and None once
    they are closed).

    Raises:
        OSError: the server could not be started.
    """
    proc = _spawn(command, args, env, cwd, errlog)
    pipes = ServerPipes(proc, noise, tap)
    if on_pipes is not None:
        on_pipes(pipes)
    try:
        yield _Read(pipes), _Write(pipes)
    finally:
        if on_pipes is not None:
            on_pipes(None)
        await pipes.close()
        summary = noise.summary()
        if summary is not None:
            log.warning(summary)


__all__ = ["ServerPipes", "available", "pipe_stdio"]
