"""Starting and stopping a stdio server served on the event loop (``pipes``).

Process handling is the SDK's ``stdio_client``'s: a new session (process group), the
SDK's default environment plus the server's, stderr to the server's log; on close,
what waits to be written gets half a second, stdin is closed, the server gets two
seconds to exit, then its process group is sent SIGTERM and, two seconds later,
SIGKILL. On Linux the server also gets SIGTERM when the process that started it dies
without stopping it (a SIGKILLed daemon): :mod:`chit.tasks.client.deathsig`. Lines on
stdout that are not MCP are counted and logged as :mod:`chit.tasks.client.noise`
describes (one warning when the connection closes).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from chit.tasks.client.deathsig import die_with_parent
from chit.tasks.client.noise import StdoutNoise
from chit.tasks.client.pipes import ServerPipes
from chit.tasks.client.tap import Tap

log = logging.getLogger("chit.tasks.client.stdio")

EXIT_WAIT_S = 2.0
KILL_WAIT_S = 2.0
FLUSH_WAIT_S = 0.5
_POLL_S = 0.01


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

    ``tap`` sees what is sent and received as JSON (the session's own messages are
    tapped on its streams); ``on_pipes`` is told the pipes, and None once closed.

    The server is forked here, on the event loop's thread (never a worker thread): on
    Linux its death signal fires when the forking thread ends, and the loop's thread
    lives as long as the daemon.

    Raises:
        OSError: the server could not be started.
    """
    proc = subprocess.Popen(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | (env or {}),
        cwd=cwd,
        start_new_session=True,
        preexec_fn=die_with_parent(),
    )
    pipes = ServerPipes(proc, noise, tap)
    if on_pipes is not None:
        on_pipes(pipes)
    try:
        yield _Read(pipes), _Write(pipes)
    finally:
        if on_pipes is not None:
            on_pipes(None)
        await stop(pipes)
        summary = noise.summary()
        if summary is not None:
            log.warning(summary)


async def stop(pipes: ServerPipes) -> None:
    """Flush, close stdin, let the server exit; then end its process group."""
    proc = pipes.proc
    with anyio.CancelScope(shield=True):
        if not pipes.in_closed:
            with anyio.move_on_after(FLUSH_WAIT_S):
                await pipes.flushed()
        pipes.draining = True
        pipes.resume_reading()  # a server stuck writing stdout cannot exit
        pipes.fail_writers()
        pipes.fail_calls()
        pipes.settle_queued()
        with suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        if not await _exited(proc, EXIT_WAIT_S):
            await _terminate(proc)
            if not await _exited(proc, KILL_WAIT_S):
                log.warning(
                    "MCP server process %d is still alive after SIGKILL; abandoning it", proc.pid
                )
        pipes.pause_reading()
        with suppress(OSError):
            proc.stdout.close()  # type: ignore[union-attr]


async def _exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while proc.poll() is None:
            await anyio.sleep(_POLL_S)
        return True
    return False


async def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group; SIGKILL what is left after two seconds."""
    pgid = proc.pid  # the leader of its own session (start_new_session)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        log.warning("no permission to signal some of process group %d", pgid)
    with anyio.move_on_after(KILL_WAIT_S):
        while _group_alive(pgid):
            proc.poll()  # reap the leader, or its zombie keeps the group alive
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
        pass  # unsignalable survivors or unreaped zombies: not proof it is gone
    return True


__all__ = ["pipe_stdio", "stop"]
