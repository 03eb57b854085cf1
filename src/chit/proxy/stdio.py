"""The host's stdio for ``chit proxy``, without a thread hop per message.

The SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``: every line read,
every write and every flush is a round trip to a worker thread — three per call, a
large share of what the proxy costs a host (``benchmarks/proxy.py``). Hosts give the
proxy pipes, which the event loop can wait on directly, so here the same streams are
fed from non-blocking pipe descriptors instead. Anything that is not a pipe or a socket
(a file, a terminal) keeps the SDK's transport.

As the SDK does, fd 0 and fd 1 are pointed elsewhere while serving (``/dev/null``, and
stderr), so a stray ``print`` or a child process can never write into the MCP channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

MAX_LINE = 16 * 1024 * 1024
"""A host line longer than this ends the session (the SDK would buffer it whole)."""


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Inline:
    """A job the reader runs itself, before it reads on: it only sends.

    The answer (if any) is written later by a callback, through the writer the
    intercept was given; ``pass_on`` also hands the line to the SDK.
    """

    __slots__ = ("pass_on", "run")

    def __init__(self, run: Callable[[], Awaitable[None]], *, pass_on: bool = False) -> None:
        """Run ``run`` inline; ``pass_on``: the SDK sees the line too."""
        self.run = run
        self.pass_on = pass_on


Job = Callable[[], Awaitable[bytes | None]]
Write = Callable[[bytes], None]
Intercept = Callable[[bytes, Write], Job | Inline | None]
"""A line of the host (and a writer of whole lines to it) → a job answering it without
the SDK: run in a task (its answer line), or :class:`Inline`; None: the SDK's."""


def host_stdio(intercept: Intercept | None = None) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` of the host's stdio (see the module docstring).

    ``intercept`` sees every line first (pipes only): a line it takes a job for is
    answered by that job (:mod:`chit.proxy.fast`) and never reaches the SDK.
    """
    if _pollable(0) and _pollable(1):
        return _pipe_stdio(intercept)
    return stdio_server()


class _Out:
    """The host's stdout: whole lines, in order, from the SDK's writer and fast jobs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = bytearray()
        self.drained: asyncio.Future[None] | None = None
        self.closed = False

    def push(self, data: bytes) -> None:
        """Write ``data`` (whole lines) now, or after what waits; never blocks."""
        if self.closed:
            return
        if self.pending:
            self.pending += data  # in order, after what came before
            return
        try:
            written = os.write(self.fd, data)
        except (BlockingIOError, InterruptedError):
            written = 0
        except OSError:
            self.close()  # the host is gone
            return
        if written < len(data):
            self.pending += data[written:]
            loop = asyncio.get_running_loop()
            loop.add_writer(self.fd, self._writable)
            self.drained = loop.create_future()

    def _writable(self) -> None:
        try:
            written = os.write(self.fd, self.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        del self.pending[:written]
        if not self.pending:
            self._settle()

    def _settle(self) -> None:
        if self.drained is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_writer(self.fd)
            if not self.drained.done():
                self.drained.set_result(None)
            self.drained = None

    async def write(self, data: bytes) -> None:
        """Write ``data`` (whole lines); wait while the host does not read."""
        self.push(data)
        if self.drained is not None:
            await asyncio.shield(self.drained)

    def close(self) -> None:
        """No more writes (the host is gone, or the session ended)."""
        self.closed = True
        self.pending.clear()
        self._settle()


@asynccontextmanager
async def _pipe_stdio(intercept: Intercept | None) -> AsyncIterator[tuple[Any, Any]]:
    in_fd, out_fd = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # a stray write to stdout lands in the log, never on the wire
    os.close(null)
    os.set_blocking(in_fd, False)
    os.set_blocking(out_fd, False)
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    out = _Out(out_fd)

    async def answer(job: Callable[[], Awaitable[bytes | None]]) -> None:
        line = await job()
        if line is not None:
            await out.write(line)

    async def reader() -> None:
        buffer = bytearray()
        # Registered once: anyio.wait_readable adds and removes the descriptor on every
        # wait, and asyncio's failed lookup before each add formats an error message.
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(in_fd, readable.set)
        try:
            await _read_lines(readable, buffer)
        finally:
            loop.remove_reader(in_fd)

    async def _read_lines(readable: asyncio.Event, buffer: bytearray) -> None:
        async with read_writer:
            while True:
                await readable.wait()
                readable.clear()
                try:
                    chunk = os.read(in_fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return  # the host closed its end: the session ends
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    if not line.strip():
                        continue
                    job = intercept(line, out.push) if intercept is not None else None
                    if isinstance(job, Inline):
                        await job.run()
                        if job.pass_on:
                            await read_writer.send(_message(line))
                    elif job is not None:
                        tg.start_soon(answer, job)
                    else:
                        await read_writer.send(_message(line))
                if len(buffer) > MAX_LINE:
                    await read_writer.send(ValueError("a message over the size limit"))
                    return

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await out.write((text + "\n").encode("utf-8"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
    finally:
        out.close()  # a late answer of a fast request is dropped, not written to a reused fd
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, in_fd, out_fd):
            os.close(fd)


def _message(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # the SDK's transport hands parse errors on the same way
        return exc
