"""Serve a task server over stdio without a thread round trip per outgoing message.

The SDK's stdio transport writes each outgoing message with ``await stdout.write(…)``
then ``await stdout.flush()`` on an ``anyio.wrap_file`` stream: two worker-thread round
trips per message, and the session's sender waits for both before it can send the next
(its write stream has no buffer). A task server's notification stream is one sender: when
200 tasks end within a second, each terminal notification waited for every earlier
one's two round trips, and on a loaded machine a round trip costs milliseconds.
Measured in ``benchmarks/reconcile.py`` (200 tasks ending at once, load 7–9): commit →
notification handed to the transport p50 1.0 s / p99 2.4 s (2025), while the store write
itself took p50 ~10 ms from its stamp to its commit.

:func:`serve_stdio` keeps the SDK's transport (framing, parsing, the session) but gives
it a stdout whose ``write`` only buffers and whose ``flush`` hands the bytes to one
writer thread and returns: messages leave in order, in as few ``write`` calls as the pipe
allows. The sender waits when more than :data:`PENDING_CAP` bytes are queued (the client
reads slower than the server writes): backpressure is kept, memory stays bounded, and
the cap is small on purpose — a slow client's backlog should wait in the notification
queues, where it coalesces and a task's end goes ahead of chatter, not in a FIFO of bytes.

As the SDK does, fd 0 and fd 1 are diverted while serving (fd 0 to the null device,
fd 1 to stderr), so a tool's stray ``print`` or a child process never writes into the
wire, and restored on exit.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import anyio

PENDING_CAP = 32 << 10
"""Bytes queued for the pipe beyond which a flush waits for the writer thread."""
CLOSE_WAIT_S = 5.0
"""How long the exit waits for queued bytes to reach the pipe."""


class PipeWriter:
    """A text sink for the SDK's stdio transport: ``flush`` queues, one thread writes.

    Only ``write`` and ``flush`` are used by the transport (the ``AsyncFile`` subset).
    """

    def __init__(self, fd: int, cap: int = PENDING_CAP) -> None:
        """Write to ``fd`` (left open) from a daemon thread; ``cap``: see :data:`PENDING_CAP`."""
        self._fd = fd
        self._cap = cap
        self._text: list[str] = []
        self._cond = threading.Condition()
        self._chunks: list[bytes] = []
        self._pending = 0
        self._closed = False
        self._error: OSError | None = None
        self.writes = 0
        """``os.write`` calls made (diagnostics: fewer than messages when batched)."""
        self._thread = threading.Thread(target=self._drain, name="chit-stdout", daemon=True)
        self._thread.start()

    async def write(self, text: str) -> int:
        """Buffer ``text`` until the next :meth:`flush`."""
        self._text.append(text)
        return len(text)

    async def flush(self) -> None:
        """Queue the buffered text for the writer thread; wait only if the queue is full.

        Raises:
            OSError: An earlier write to the pipe failed (the client went away).
        """
        data = "".join(self._text).encode("utf-8")
        self._text.clear()
        with self._cond:
            if self._error is not None:
                raise self._error
            if data:
                self._chunks.append(data)
                self._pending += len(data)
                self._cond.notify_all()
            full = self._pending > self._cap
        if full:
            await anyio.to_thread.run_sync(self._wait_for_room)

    def _wait_for_room(self) -> None:
        with self._cond:
            while self._pending > self._cap and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def _drain(self) -> None:
        while True:
            with self._cond:
                while not self._chunks and not self._closed:
                    self._cond.wait()
                if not self._chunks:
                    return
                data = b"".join(self._chunks)
                self._chunks.clear()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
                    self.writes += 1
            except OSError as exc:
                with self._cond:
                    self._error = exc
                    self._chunks.clear()
                    self._pending = 0
                    self._cond.notify_all()
                return
            with self._cond:
                self._pending -= len(data)
                self._cond.notify_all()

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Let the thread write what is queued, then stop it (waits up to ``timeout``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)


def _dup_high(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


@asynccontextmanager
async def _claimed_stdio() -> AsyncIterator[tuple[Any, PipeWriter]]:
    """The wire's stdin (an async text file) and stdout (:class:`PipeWriter`), fds diverted."""
    sys.stdout.flush()
    wire_in, wire_out = _dup_high(0), _dup_high(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    # closefd=False: a worker thread may still block reading it after we return.
    reader = open(wire_in, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    writer = PipeWriter(wire_out)
    try:
        yield anyio.wrap_file(reader), writer
    finally:
        await anyio.to_thread.run_sync(writer.close)
        with suppress(OSError):
            os.dup2(wire_in, 0)
        with suppress(OSError):
            os.dup2(wire_out, 1)


async def serve_stdio(server: Any) -> None:
    """Run ``server`` (an ``MCPServer``) on this process's stdin/stdout until EOF."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with (
        _claimed_stdio() as (stdin, stdout),
        stdio_server(stdin=stdin, stdout=cast(Any, stdout)) as (read_stream, write_stream),
    ):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def run_stdio(server: Any) -> None:
    """Serve ``server`` over stdio (blocking); the SDK's own transport off POSIX."""
    if sys.platform == "win32":  # pragma: no cover - no fcntl: the SDK's transport
        server.run("stdio")
        return
    anyio.run(serve_stdio, server)
