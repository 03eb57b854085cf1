"""The control socket's frames on the event loop: lines read, whole frames written.

anyio's UNIX socket stream pays on every call what a proxied ``tools/call`` does four
times per end (``benchmarks/proxy.py``): each receive and each send first yields to the
event loop, and each wait for data registers the socket with the loop and removes it
again (two system calls, and asyncio formats an error message for the failed lookup
before each registration). Here the socket stays registered while its reader waits
(removed only when data arrives with no one waiting, so an idle reader never spins), a
line already buffered is returned without yielding, and a frame is written at once when
the socket takes it (:meth:`LineSocket.send_nowait`: whole frames, in order; what the
socket cannot take yet waits in a buffer, written as it drains).

Both ends use it on the socket anyio connected or accepted (its ``raw_socket``); the
stream stays the owner that closes it — :meth:`LineSocket.detach` first.
"""

from __future__ import annotations

import asyncio
import socket
from contextlib import suppress

import anyio

CHUNK = 1 << 16


class LineSocket:
    """A connected socket, read as lines of at most ``limit`` bytes, written as frames."""

    def __init__(self, sock: socket.socket, limit: int) -> None:
        """Serve ``sock`` (made non-blocking) on the running event loop."""
        sock.setblocking(False)
        self.sock = sock
        self.limit = limit
        self._fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._scanned = 0
        self._eof = False
        self._reading = False
        self._ready: asyncio.Future[None] | None = None
        self._pending = bytearray()
        self._drained: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._detached = False

    # --- reading ----------------------------------------------------------------------

    async def receive_line(self) -> bytes:
        """The next line, without its newline.

        Raises:
            anyio.DelimiterNotFound: ``limit`` bytes arrived without a newline.
            anyio.EndOfStream: the peer closed the connection between lines.
            anyio.IncompleteRead: it closed in the middle of one.
            anyio.BrokenResourceError: the connection failed.
        """
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(buffer)
            if len(buffer) > self.limit:
                raise anyio.DelimiterNotFound(self.limit)
            if self._eof:
                raise anyio.IncompleteRead if buffer else anyio.EndOfStream
            try:
                chunk = self.sock.recv(CHUNK)
            except (BlockingIOError, InterruptedError):
                await self._readable()
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if chunk:
                buffer += chunk
            else:
                self._eof = True

    async def _readable(self) -> None:
        if self._detached:
            raise anyio.EndOfStream  # closed here: nothing more will be read
        self._ready = self._loop.create_future()
        if not self._reading:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True
        try:
            await self._ready
        finally:
            self._ready = None

    def _on_readable(self) -> None:
        if self._ready is None:
            # Nobody waits (the reader is busy): stop watching, or the loop would spin.
            self._loop.remove_reader(self._fd)
            self._reading = False
        elif not self._ready.done():
            self._ready.set_result(None)

    # --- writing ----------------------------------------------------------------------

    def send_nowait(self, data: bytes) -> None:
        """Write ``data`` (whole frames) now, or after what waits; never blocks.

        Raises:
            anyio.BrokenResourceError: the connection failed.
            anyio.ClosedResourceError: it was closed here.
        """
        if self._error is not None:
            raise anyio.BrokenResourceError from self._error
        if self._detached:
            raise anyio.ClosedResourceError
        if self._pending:
            self._pending += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._error = exc
            raise anyio.BrokenResourceError from exc
        if sent < len(data):
            self._pending += data[sent:]
            self._loop.add_writer(self._fd, self._on_writable)
            self._drained = self._loop.create_future()

    async def send(self, data: bytes) -> None:
        """Write ``data`` (whole frames); wait while the peer does not read.

        Raises:
            anyio.BrokenResourceError: the connection failed.
            anyio.ClosedResourceError: it was closed here.
        """
        self.send_nowait(data)
        drained = self._drained
        if drained is not None:
            await asyncio.shield(drained)
            if self._error is not None:
                raise anyio.BrokenResourceError from self._error

    def _on_writable(self) -> None:
        try:
            sent = self.sock.send(self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error = exc
            self._stop_writing()
            return
        del self._pending[:sent]
        if not self._pending:
            self._stop_writing()

    def _stop_writing(self) -> None:
        with suppress(Exception):
            self._loop.remove_writer(self._fd)
        self._pending.clear()
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # --- closing ----------------------------------------------------------------------

    def detach(self) -> None:
        """Stop watching the socket (before its stream closes it); wake the waiters."""
        if self._detached:
            return
        self._detached = True
        if self._reading:
            with suppress(Exception):
                self._loop.remove_reader(self._fd)
            self._reading = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)
        self._stop_writing()


__all__ = ["LineSocket"]
