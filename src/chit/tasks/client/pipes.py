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
* :meth:`ServerPipes.request` / :meth:`ServerPipes.request_soon` send a request as JSON
  and hand its answer back as JSON: the reader settles the request directly, without
  the SDK's models, request bookkeeping or receive loop (``chit proxy``'s forwarded
  requests, whose answers are passed on unread). Their ids come from the session's
  own counter, so they never meet the session's requests, and an answer is settled in
  the order the server sent it (after the messages before it);
* a task status notification goes to :attr:`ServerPipes.on_note` when one is set (the
  task client's :class:`~chit.tasks.client.hint_queue.HintQueue`), not through the
  session: a hint, read as JSON and coalesced per task.

Starting and stopping the process: :mod:`chit.tasks.client.pipe_stdio`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from chit.tasks.client.hint_queue import NOTE_MARK, task_note
from chit.tasks.client.noise import StdoutNoise
from chit.tasks.client.pipe_calls import Outcome, PipeCall, Reply, closed, parse_answer
from chit.tasks.client.tap import Tap

log = logging.getLogger("chit.tasks.client.stdio")

CHUNK = 1 << 16
QUEUE_HIGH = 256
"""Messages the session has not taken yet before the reader pauses (back-pressure)."""


def available() -> bool:
    """True where this transport runs: POSIX, on asyncio."""
    if sys.platform == "win32":
        return False
    try:
        asyncio.get_running_loop()  # none under trio
    except RuntimeError:
        return False
    return True


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
        self.draining = False
        self._pending = bytearray()
        self._drained: asyncio.Future[bool] | None = None
        self.in_closed = False
        self._calls: dict[Any, PipeCall] = {}
        self.on_note: Callable[[str, dict[str, Any]], None] | None = None
        """Takes (task id, params) of every task status notification (must not block)."""
        self.resume_reading()

    # --- reading ----------------------------------------------------------------------

    def resume_reading(self) -> None:
        """Watch stdout again (also while closing: a server stuck writing cannot exit)."""
        if not self._reading and not self.eof:
            self._loop.add_reader(self._out, self._readable)
            self._reading = True

    def pause_reading(self) -> None:
        """Stop watching stdout."""
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
        if self.draining:
            return  # closing: read only so the server is never stuck writing
        buffer = self._buffer
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self._line(line)
        if len(self._queue) >= QUEUE_HIGH:
            self.pause_reading()

    def _line(self, line: bytes) -> None:
        if self._calls and self._answer(line):
            return
        if self.on_note is not None and NOTE_MARK in line and self._note(line):
            return
        try:
            item: Any = SessionMessage(
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            )
        except ValueError as exc:  # pydantic's ValidationError is one
            self.noise.record(line.decode("utf-8", "replace"))
            item = exc  # the session sees it, as with the SDK's transport
        self._push(item)

    def _answer(self, line: bytes) -> bool:
        """Settle a waiting :class:`PipeCall` with ``line`` if it is its answer."""
        parsed = parse_answer(line)
        if parsed is None:
            return False
        key, outcome, msg = parsed
        call = self._calls.pop(key, None)
        if call is None:
            return False
        if self.tap is not None:
            self._observe("received", msg)
        if self._queue:
            self._push(Reply(call, outcome))  # after what the server sent before it
        else:
            call.settle(outcome)
        return True

    def _note(self, line: bytes) -> bool:
        """Hand ``line`` to :attr:`on_note` if it is a task status notification."""
        parsed = task_note(line)
        if parsed is None or self.on_note is None:
            return False
        task_id, params, msg = parsed
        if self.tap is not None:
            self._observe("received", msg)
        self.on_note(task_id, params)
        return True

    def _push(self, item: Any) -> None:
        self._queue.append(item)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _end(self) -> None:
        """The server closed its stdout (exited): the session ends, requests fail."""
        self.pause_reading()
        self.eof = True
        self.fail_calls()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def fail_calls(self) -> None:
        """Every request sent as JSON ends with ``CONNECTION_CLOSED``."""
        for call in list(self._calls.values()):  # each leaves the dict as it settles
            call.settle(closed())
        self._calls.clear()

    def settle_queued(self) -> None:
        """Settle the answers still queued (closing: the session's loop will not come)."""
        for item in self._queue:
            if isinstance(item, Reply):
                item.call.settle(item.outcome)

    async def receive(self) -> SessionMessage | Exception:
        """The next message of the server for the session (its receive loop).

        Raises:
            anyio.EndOfStream: the server closed its stdout.
        """
        while True:
            while self._queue:
                item = self._queue.popleft()
                if not self._reading and len(self._queue) < QUEUE_HIGH // 2:
                    self.resume_reading()
                if isinstance(item, Reply):
                    # Soon, not now: after the tasks the session just started for the
                    # messages before it, as the SDK's path wakes a waiting request.
                    self._loop.call_soon(item.call.settle, item.outcome)
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

    def write_nowait(self, data: bytes) -> None:
        """Write whole lines to the server's stdin now, or after what waits, in order.

        Raises:
            anyio.BrokenResourceError: the server closed its stdin (or exited).
        """
        if self.in_closed:
            raise anyio.BrokenResourceError
        if self._pending:
            self._pending += data
            return
        try:
            written = os.write(self._in, data)
        except (BlockingIOError, InterruptedError):
            written = 0
        except OSError:
            self._broken()
            raise anyio.BrokenResourceError from None
        if written < len(data):
            self._pending += data[written:]
            self._loop.add_writer(self._in, self._writable)
            self._drained = self._loop.create_future()

    async def write(self, data: bytes) -> None:
        """:meth:`write_nowait`, then wait while the pipe is full.

        Raises:
            anyio.BrokenResourceError: the server closed its stdin (or exited).
        """
        self.write_nowait(data)
        if self._drained is not None and not await asyncio.shield(self._drained):
            raise anyio.BrokenResourceError

    async def flushed(self) -> None:
        """Wait until what waits to be written is written (or cannot be)."""
        if self._drained is not None:
            await asyncio.shield(self._drained)

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
            self._settle_drained(True)

    def _settle_drained(self, written: bool) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(written)

    def _broken(self) -> None:
        """Stdin is gone: writers fail, and the session sees the connection end."""
        self.fail_writers()
        self._end()

    def fail_writers(self) -> None:
        """No more writes: what waits is dropped, its writers fail."""
        if not self.in_closed:
            self.in_closed = True
            with suppress(Exception):
                self._loop.remove_writer(self._in)
        self._pending.clear()
        self._settle_drained(False)

    async def send(self, message: SessionMessage) -> None:
        """Send one of the session's messages (the SDK's serialisation)."""
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.write((text + "\n").encode("utf-8"))

    # --- requests answered as JSON ----------------------------------------------------

    def request_soon(
        self,
        request_id: int,
        method: str,
        params: dict[str, Any] | None,
        timeout: float,
        done: Callable[[Outcome], None],
    ) -> PipeCall:
        """Send a request as JSON; ``done`` gets its :data:`Outcome`, once.

        ``done`` runs in the reader (or the timer, or :meth:`PipeCall.cancel`) and must
        not block. As the SDK's ``send_raw_request`` does, a courtesy
        ``notifications/cancelled`` goes out when the caller cancels or the timeout
        passes.

        Raises:
            MCPError: ``CONNECTION_CLOSED``: the server is gone (``done`` is not called).
        """
        if self.eof or self.in_closed:
            raise closed()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        call = PipeCall(self._calls, self.cancel_nowait, request_id, method, timeout, done)
        if self.tap is not None:
            self._observe("sent", message)
        try:
            self.write_nowait(line.encode("utf-8"))
        except anyio.BrokenResourceError:
            raise closed() from None
        self._calls[call.key] = call
        # A timer, not a cancel scope: one per call was measurable.
        call.timer = self._loop.call_later(timeout, call.expire)
        return call

    async def request(
        self, request_id: int, method: str, params: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        """:meth:`request_soon`, waited for: the server's result.

        Raises:
            MCPError: the server's error; ``REQUEST_TIMEOUT`` after ``timeout`` seconds;
                ``CONNECTION_CLOSED`` when the server went away.
        """
        future: asyncio.Future[Outcome] = self._loop.create_future()

        def done(outcome: Outcome) -> None:
            if not future.done():
                future.set_result(outcome)

        call = self.request_soon(request_id, method, params, timeout, done)
        try:
            outcome = await future
        except BaseException:
            call.cancel()
            raise
        if isinstance(outcome, MCPError):
            raise outcome
        assert outcome is not None
        return outcome

    def cancel_nowait(self, request_id: int, reason: str) -> None:
        """Send ``notifications/cancelled`` for ``request_id`` (dropped if stdin is gone)."""
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        if self.tap is not None:
            self._observe("sent", message)
        with suppress(anyio.BrokenResourceError):
            self.write_nowait((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def _observe(self, direction: Any, message: dict[str, Any]) -> None:
        assert self.tap is not None
        try:
            self.tap(direction, message)
        except Exception:  # an observer never breaks the connection
            log.warning("protocol tap raised", exc_info=True)


__all__ = ["Outcome", "PipeCall", "ServerPipes", "available"]
