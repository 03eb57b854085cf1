"""One task-client connection per server: reused, reconnected with backoff, bounded.

Each connection is owned by a long-lived task (anyio cancel scopes must be exited by the
task that entered them); users borrow the connected ``TaskClient``. A failure marks the
connection broken, its owner closes it, and the next borrower reconnects — no sooner
than the backoff allows, so a dead server costs one attempt per backoff step.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from chit.clock import Clock, current_clock
from chit.errors import ChitError, NotFound
from chit.reconcile.limits import PriorityLimiter
from chit.reconcile.protocol_log import ProtocolLog
from chit.tasks.client import (
    HintCallback,
    IncompatibleError,
    InputHandler,
    Mode,
    ServerSpec,
    StdioServer,
    TaskClient,
    TransientError,
)

log = logging.getLogger("chit.reconcile")

SpecResolver = Callable[[str], ServerSpec]
"""Server name → how to reach it (raises ``NotFound``/``UsageError`` for bad names)."""

ServerInput = Callable[[str, str | None, Any], Awaitable[Any]]
"""(server, related task id or None, InputRequest) → InputResponse | ErrorData."""

ServerMessage = Callable[[str, Any], Awaitable[None]]
"""(server, notification model): a server's notification other than task status."""

RECONNECT_FLOOR_S = 0.5
RECONNECT_CEILING_S = 30.0


@dataclass(frozen=True)
class ClientOptions:
    """How connections are made.

    Attributes:
        mode: the task-client mode (``auto`` negotiates).
        read_timeout: seconds for any ordinary reply (never unbounded).
        result_timeout: seconds for synchronous calls and blocking ``tasks/result``.
        notifications: False ignores server push; polling alone must converge.
        max_concurrency: requests in flight per server.
    """

    mode: Mode = "auto"
    read_timeout: float = 30.0
    result_timeout: float = 3600.0
    notifications: bool = True
    max_concurrency: int = 16


@dataclass
class _Conn:
    limiter: PriorityLimiter
    client: TaskClient | None = None
    stop: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    failures: int = 0
    not_before: float = 0.0
    last_error: str | None = None
    connected_at: datetime | None = None
    stdio: bool = False
    last_used: float = 0.0


LOST_WITH_DAEMON = (
    "the server process ended with chit's daemon (or the chit command that ran it): "
    "a stdio server's tasks live only as long as its process, and this one ended with it"
)
LOST_WITH_RESTART = (
    "the server process that ran this task ended (it exited or was restarted) and its "
    "tasks ended with it: a stdio server's tasks live only as long as its process"
)
LOST_WITH_SESSION = (
    "the server no longer knows this task: it was started in an earlier session (one "
    "that ended with chit's daemon, or a reconnect), and this server keeps tasks per session"
)


@dataclass(frozen=True)
class ConnectionState:
    """One server's connection as the pool sees it (for status screens and the daemon).

    Attributes:
        connected: a session is open now.
        connected_at: when the current (or last) session was opened.
        failures: consecutive failed attempts since the last success.
        last_error: why the last attempt or request failed.
        retry_in_s: seconds before the backoff allows another attempt (0: now).
        stdio: the server is a child process (known once a connection was tried).
        idle_s: seconds since the session was last used.
    """

    server: str
    connected: bool
    connected_at: datetime | None
    failures: int
    last_error: str | None
    retry_in_s: float
    stdio: bool = False
    idle_s: float = 0.0


class _Slot:
    """One check's hold on a server's slot: a plain async context manager, entered once
    per check (two generator-based ones, nested, were a measurable part of a check)."""

    __slots__ = ("_clock", "_conn", "_key", "_urgent")

    def __init__(self, conn: _Conn, urgent: bool, key: Hashable | None, clock: Clock) -> None:
        self._conn, self._urgent, self._key, self._clock = conn, urgent, key, clock

    async def __aenter__(self) -> None:
        await self._conn.limiter.acquire(self._urgent, self._key)
        self._conn.last_used = self._clock.monotonic()

    async def __aexit__(self, *_exc: object) -> None:
        self._conn.last_used = self._clock.monotonic()
        self._conn.limiter.release()


class ConnectionPool:
    """Connections to every server the engine talks to, owned by one task group."""

    def __init__(
        self,
        resolve: SpecResolver,
        tg: TaskGroup,
        options: ClientOptions,
        *,
        on_hint: HintCallback | None = None,
        input_handler: InputHandler | None = None,
        clock: Clock | None = None,
        server_input: ServerInput | None = None,
        on_message: ServerMessage | None = None,
    ) -> None:
        """Create an empty pool; connections open on first use; backoff runs on ``clock``.

        ``server_input`` (which wins over ``input_handler``) and ``on_message`` are told
        which server the request or notification came from: ``chit proxy`` routes them
        to the host that owns the call.
        """
        self.clock = clock or current_clock()
        self._resolve = resolve
        self._tg = tg
        self.options = options
        self._on_hint = on_hint if options.notifications else None
        self._input_handler = input_handler
        self._server_input = server_input
        self._on_message = on_message
        self._conns: dict[str, _Conn] = {}
        self._rng = random.Random()
        self.protocol = ProtocolLog()
        """The last JSON-RPC messages of every server (the TUI's protocol pane)."""
        self.started_at = self.clock.now()

    def _conn(self, server: str) -> _Conn:
        conn = self._conns.get(server)
        if conn is None:
            conn = _Conn(limiter=PriorityLimiter(self.options.max_concurrency))
            conn.closed.set()  # no owner task yet: nothing to wait for on close
            self._conns[server] = conn
        return conn

    def limit(self, server: str, *, urgent: bool = False, key: Hashable | None = None) -> _Slot:
        """Hold one of the server's concurrency slots for the ``async with`` block.

        ``urgent`` (a hint-triggered check) is served before every ordinary waiter;
        ``key`` lets :meth:`promote` find this waiter while it is queued.
        """
        return _Slot(self._conn(server), urgent, key, self.clock)

    def promote(self, server: str, key: Hashable) -> bool:
        """Make a queued check urgent; True when it had not started yet."""
        conn = self._conns.get(server)
        return conn is not None and conn.limiter.promote(key)

    def state(self, server: str) -> ConnectionState:
        """The connection state of ``server`` (never connected: all defaults)."""
        conn = self._conns.get(server)
        if conn is None:
            return ConnectionState(server, False, None, 0, None, 0.0)
        now = self.clock.monotonic()
        return ConnectionState(
            server,
            conn.client is not None,
            conn.connected_at,
            conn.failures,
            conn.last_error,
            max(0.0, conn.not_before - now),
            conn.stdio,
            max(0.0, now - conn.last_used) if conn.client is not None else 0.0,
        )

    def lost_with_process(
        self, server: str, accepted_at: datetime, expires_at: datetime | None = None
    ) -> str | None:
        """Why a task the server no longer knows is gone, when its session is newer.

        A stdio server's tasks live in its process: when the session that answered is
        newer than the task, the task was started by an earlier process of the server —
        one that ended with chit's daemon (the task predates this engine) or that exited
        or was restarted since. An HTTP server that answers "unknown task" for a task of
        an earlier session keeps tasks per session. None when the session that answered
        is the task's own: the server's word stands.
        """
        conn = self._conns.get(server)
        if conn is None or conn.connected_at is None or accepted_at >= conn.connected_at:
            return None
        if expires_at is not None and self.clock.now() >= expires_at:
            return None  # its TTL ran out: that is why it is gone
        if not conn.stdio:
            return LOST_WITH_SESSION
        return LOST_WITH_DAEMON if accepted_at < self.started_at else LOST_WITH_RESTART

    def servers(self) -> list[str]:
        """Names of the servers this pool has tried to reach."""
        return sorted(self._conns)

    def current(self, server: str) -> TaskClient | None:
        """The connected client of ``server`` right now (None while disconnected)."""
        conn = self._conns.get(server)
        return conn.client if conn is not None else None

    async def get(self, server: str) -> TaskClient:
        """Return the connected client for ``server``, connecting if needed.

        Raises:
            TransientError: the connection failed, or the backoff after a failure has
                not elapsed yet (the message says when the next attempt is), or the
                server's spec could not be resolved (vault, variables, config).
            IncompatibleError: the server is no longer registered.
        """
        conn = self._conn(server)
        conn.last_used = self.clock.monotonic()
        if conn.client is not None:
            return conn.client
        async with conn.lock:
            if conn.client is not None:
                return conn.client
            wait = conn.not_before - self.clock.monotonic()
            if wait > 0:
                raise TransientError(
                    f"server {server!r} unreachable ({conn.last_error}); retrying in {wait:.1f} s",
                    method="initialize",
                )
            spec = self._spec(server)
            conn.stdio = isinstance(spec, StdioServer)
            conn.stop, conn.closed = anyio.Event(), anyio.Event()
            try:
                client: TaskClient = await self._tg.start(self._own, spec, conn, server)
            except Exception as exc:
                conn.failures += 1
                conn.last_error = str(exc)[:200]
                delay = min(RECONNECT_CEILING_S, RECONNECT_FLOOR_S * 2 ** min(conn.failures, 10))
                conn.not_before = self.clock.monotonic() + delay * self._rng.uniform(1.0, 1.2)
                log.info("connect to %s failed: %s", server, conn.last_error)
                if isinstance(exc, TransientError):
                    raise
                raise TransientError(f"cannot connect: {exc}", method="initialize") from exc
            conn.client = client
            conn.connected_at = self.clock.now()
            conn.last_used = self.clock.monotonic()
            return client

    def peek(self, server: str) -> TaskClient | None:
        """The connected client of ``server`` without waiting, or None (``get`` connects)."""
        conn = self._conns.get(server)
        if conn is None or conn.client is None:
            return None
        conn.last_used = self.clock.monotonic()
        return conn.client

    def _spec(self, server: str) -> ServerSpec:
        """Resolve ``server``; every failure is a ``TaskError`` the check can record.

        Raises:
            IncompatibleError: the server is no longer registered (asking again the same
                way cannot help; a person decides).
            TransientError: anything else (a locked vault, an unset variable, an
                unreadable config): retried with backoff, it may be fixed meanwhile.
        """
        try:
            return self._resolve(server)
        except NotFound as exc:
            raise IncompatibleError(
                f"server {server!r} is no longer registered ({exc})", method="initialize"
            ) from exc
        except Exception as exc:
            message = exc.message if isinstance(exc, ChitError) else f"{type(exc).__name__}: {exc}"
            raise TransientError(
                f"cannot resolve server {server!r}: {message}"[:300], method="initialize"
            ) from exc

    def succeeded(self, server: str) -> None:
        """A request got an answer: forget earlier connection failures."""
        conn = self._conns.get(server)
        if conn is not None:
            conn.failures = 0
            conn.last_error = None

    def broken(self, server: str, client: TaskClient | None = None) -> None:
        """The connection failed in use: close it; the next ``get`` reconnects."""
        conn = self._conns.get(server)
        if conn is None or conn.client is None:
            return
        if client is not None and conn.client is not client:
            return  # already replaced
        conn.client = None
        conn.stop.set()

    async def wait_closed(self, server: str) -> None:
        """Wait until a broken connection of ``server`` is closed (its process ended)."""
        conn = self._conns.get(server)
        if conn is not None and conn.client is None:
            await conn.closed.wait()

    async def _own(
        self, spec: ServerSpec, conn: _Conn, server: str, *, task_status: TaskStatus[Any]
    ) -> None:
        opts = self.options
        started = False
        mine: TaskClient | None = None
        # This owner's events, made by get() under conn.lock: a reconnect replaces
        # conn.stop/closed while an earlier owner may still be closing, and that owner
        # must neither set its successor's ``closed`` nor forget its successor's client
        # (which left the successor waiting on an event no one would set, until the
        # engine's shutdown cancelled it while connected).
        stop, closed = conn.stop, conn.closed
        handler = self._input_handler
        if self._server_input is not None:
            handler = partial(self._server_input, server)
        on_message = partial(self._on_message, server) if self._on_message is not None else None
        try:
            async with TaskClient(
                spec,
                mode=opts.mode,
                read_timeout=opts.read_timeout,
                result_timeout=opts.result_timeout,
                input_handler=handler,
                on_hint=self._on_hint,
                declare_sampling="sampling" in getattr(spec, "declare", ()),
                declare_roots="roots" in getattr(spec, "declare", ()),
                tap=self.protocol.tap(server),
                on_message=on_message,
            ) as client:
                task_status.started(client)
                started, mine = True, client
                await stop.wait()
        except Exception as exc:
            if not started:
                raise
            # The connection died under us (server exited); the borrowers see their
            # requests fail and the next get() reconnects.
            log.info("connection closed: %s", type(exc).__name__)
        finally:
            closed.set()
            if started and conn.client is mine and not stop.is_set():
                conn.client = None

    async def aclose(self) -> None:
        """Close every connection and wait for their owners to finish."""
        for conn in self._conns.values():
            conn.client = None
            conn.stop.set()
        for conn in self._conns.values():
            with anyio.move_on_after(5):  # real time: a bound on a peer's shutdown
                await conn.closed.wait()
