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


Intercept = Callable[[bytes], Callable[[], Awaitable[bytes | None]] | None]
"""A line of the host → a job answering it without the SDK (its answer line), or None."""


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
        self.flushing = False

    async def write(self, data: bytes) -> None:
        """Queue ``data`` (whole lines) and write it out unless a write is under way."""
        self.pending += data
        if self.flushing:
            return  # the write under way takes it along, after what came before
        self.flushing = True
        try:
            while self.pending:
                try:
                    written = os.write(self.fd, self.pending)
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
                    continue
                except OSError:
                    self.pending.clear()  # the host is gone
                    return
                del self.pending[:written]
        finally:
            self.flushing = False


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
                    job = intercept(line) if intercept is not None else None
                    if job is not None:
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
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, in_fd, out_fd):
            os.close(fd)


def _message(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # the SDK's transport hands parse errors on the same way
        return exc
