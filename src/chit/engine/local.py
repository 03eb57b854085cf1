"""The in-process engine: the :class:`chit.engine.Engine` protocol over a Supervisor.

Used by ``--no-daemon`` commands and tests, and by the daemon itself (the socket server
dispatches every request to one of these), so a request means the same whichever way it
arrives. Runs on the Supervisor's event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, TaskGroup

from chit.engine._groups import sole_error
from chit.engine.feed import ChangeFeed
from chit.engine.models import (
    EngineEvent,
    ProtocolMessage,
    ReconcileSummary,
    ServerStatus,
    ToolInfo,
    ToolsInfo,
)
from chit.errors import NotFound
from chit.home import Home
from chit.receipts import Receipt
from chit.reconcile import SpecResolver
from chit.runtime import Supervisor, SupervisorOptions
from chit.servers.spec import valid_name

TOOLS_TIMEOUT_S = 20.0
"""Default wait for a server to describe its tools."""


class LocalEngine:
    """The engine in this process (implements :class:`chit.engine.Engine`).

    Open with :meth:`open`; or wrap a Supervisor already open with ``LocalEngine(sup, tg)``.
    """

    def __init__(self, supervisor: Supervisor, tg: TaskGroup) -> None:
        """Serve ``supervisor``; the change feed's watcher runs in ``tg``."""
        self.supervisor = supervisor
        self.feed = ChangeFeed(supervisor.store, announced=supervisor.writer.announced_through)
        self._stop = anyio.Event()
        self._unsubscribe = supervisor.subscribe(self.feed.on_bus_event)
        tg.start_soon(self.feed.watch_external, self._stop)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Home,
        *,
        environ: Mapping[str, str] | None = None,
        options: SupervisorOptions | None = None,
        resolve: SpecResolver | None = None,
        run: bool = False,
    ) -> AsyncIterator[LocalEngine]:
        """Open a Supervisor on ``home`` and serve it.

        Args:
            run: also reconcile (and host the sidecar executor) until the block ends,
                as the daemon and an in-process TUI do. False: act only when asked.

        Raises:
            KeyStoreUnavailable, DataKeyMissing: the vault cannot be unlocked (exit 4).
        """
        try:
            async with (
                Supervisor.open(home, environ=environ, options=options, resolve=resolve) as sup,
                anyio.create_task_group() as tg,
            ):
                engine = cls(sup, tg)
                if run:
                    tg.start_soon(sup.run, engine._stop)
                try:
                    yield engine
                finally:
                    engine.close()
        except BaseExceptionGroup as group:
            raise sole_error(group) from None

    def close(self) -> None:
        """Stop the feed's watcher (and ``run``, when started by :meth:`open`)."""
        self._unsubscribe()
        self._stop.set()
        self.feed.wake()

    # --- acting ---------------------------------------------------------------------

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """See ``Engine.call``."""
        from chit.servers.tools import ServerUnreachable

        try:
            return await self.supervisor.call(
                server,
                tool,
                arguments,
                purpose=purpose,
                work_ref=work_ref,
                ttl_ms=ttl_ms,
                accept_if=accept_if,
            )
        except ServerUnreachable as exc:
            raise ServerUnreachable(exc.message + self._stderr_hint(server)) from None

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """See ``Engine.answer``."""
        return await self.supervisor.answer(
            receipt_id, key, content, decline=decline, cancel=cancel
        )

    async def cancel(self, receipt_id: str) -> Receipt:
        """See ``Engine.cancel``."""
        return await self.supervisor.cancel(receipt_id)

    async def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """See ``Engine.accept``."""
        return self.supervisor.accept(receipt_id, why)

    async def reject(self, receipt_id: str, why: str) -> Receipt:
        """See ``Engine.reject``."""
        return self.supervisor.reject(receipt_id, why)

    async def reopen(self, receipt_id: str) -> Receipt:
        """See ``Engine.reopen``."""
        return self.supervisor.reopen(receipt_id)

    async def protocol_log(self, server: str, *, limit: int = 100) -> list[ProtocolMessage]:
        """See ``Engine.protocol_log`` (the pool's rings; nothing is kept on disk)."""
        logged = self.supervisor.pool.protocol.messages(server, limit)
        return [
            ProtocolMessage(
                at=m.at,
                direction="sent" if m.direction == "sent" else "received",
                kind=m.kind,
                method=m.method,
                id=m.id,
                text=m.text,
            )
            for m in logged
        ]

    async def receipt(self, receipt_id: str) -> Receipt:
        """See ``Engine.receipt``."""
        return self.supervisor.store.receipts.get_by_prefix(receipt_id)

    async def follow(self, receipt_id: str) -> Receipt:
        """See ``Engine.follow`` (reconciles the receipt here unless another process does)."""
        return await self.supervisor.follow(receipt_id)

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """See ``Engine.retry_intent``."""
        return await self.supervisor.retry_intent(
            request_key, arguments, ttl_ms=ttl_ms, accept_if=accept_if
        )

    async def abandon_intent(self, request_key: str) -> None:
        """See ``Engine.abandon_intent``."""
        self.supervisor.abandon_intent(request_key)

    async def reconcile_now(self) -> ReconcileSummary:
        """See ``Engine.reconcile_now``."""
        report = await self.supervisor.reconcile_once()
        return ReconcileSummary(
            viewer=report.viewer,
            holder=report.holder,
            checked=report.checked,
            intents_unknown=report.intents_unknown,
            by_state=dict(report.by_state),
            problems=report.problems,
        )

    # --- servers --------------------------------------------------------------------

    async def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """See ``Engine.tools``: through the pooled session (no second server process).

        Raises:
            NotFound: ``server`` is not registered.
            ServerUnreachable: it cannot be started or reached in time.
            ServerProtocolError: it answered with an error or invalid MCP.
        """
        from chit.servers.tools import ServerProtocolError, ServerUnreachable
        from chit.tasks.client import IncompatibleError, TaskError

        wait = TOOLS_TIMEOUT_S if timeout is None else timeout
        pool = self.supervisor.pool
        try:
            with anyio.fail_after(wait):
                client = await pool.get(server)
                listed = await client.list_tools()
                summary = client.server_summary()
        except TimeoutError:
            raise ServerUnreachable(
                f"server {server!r} did not answer within {wait:g} s{self._stderr_hint(server)}"
            ) from None
        except IncompatibleError as exc:
            if isinstance(exc.__cause__, NotFound):
                raise NotFound(f"no server named {server!r}") from None
            raise ServerProtocolError(f"server {server!r}: {exc}") from None
        except TaskError as exc:
            if exc.failure_class == "transient":
                pool.broken(server, client=pool.current(server))
                raise ServerUnreachable(
                    f"server {server!r} is unreachable: {exc.message}{self._stderr_hint(server)}"
                ) from None
            raise ServerProtocolError(f"server {server!r}: {exc}") from None
        pool.succeeded(server)
        return tools_info(server, summary, listed)

    def _stderr_hint(self, server: str) -> str:
        """The last line a stdio server wrote to stderr: most start-up failures say why."""
        from chit.runtime.server_logs import last_line

        line = last_line(self.supervisor.home, server) if valid_name(server) else ""
        return f" (server stderr: {line}; see `chit logs {server}`)" if line else ""

    async def servers(self) -> list[ServerStatus]:
        """See ``Engine.servers``."""
        from chit.runtime.server_logs import server_log_path, server_pids
        from chit.servers import Registry

        sup = self.supervisor
        live = _live_by_server(sup)
        pids = server_pids(sup.home)
        statuses = []
        for spec in Registry.for_home(sup.home).servers().values():
            state = sup.pool.state(spec.name)
            stdio = spec.transport == "stdio"
            statuses.append(
                ServerStatus(
                    name=spec.name,
                    transport=spec.transport,
                    connected=state.connected,
                    session_started_at=state.connected_at,
                    failures=state.failures,
                    last_error=state.last_error,
                    retry_in_s=round(state.retry_in_s, 3),
                    live_receipts=live.get(spec.name, 0),
                    pid=pids.get(spec.name) if stdio and state.connected else None,
                    log_path=str(server_log_path(sup.home, spec.name)) if stdio else None,
                    hosts=sup.traffic.connected_hosts(spec.name),
                )
            )
        return statuses

    # --- events ---------------------------------------------------------------------

    def events(
        self, *, receipt_id: str | None = None, since: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[EngineEvent]]:
        """See ``Engine.events``."""
        return self.feed.subscribe(receipt_id, since)


async def tools_once(home: Home, server: str, timeout: float = TOOLS_TIMEOUT_S) -> ToolsInfo:
    """Describe ``server`` over a connection of its own, without the engine (no data key).

    What ``chit tools`` does with ``--no-daemon``: listing tools needs no vault unless
    the server's registered secrets are sealed, so it must not fail for want of one.

    Raises:
        NotFound: not registered. ServerUnreachable: not started/reached in time (with
        the last line it wrote to stderr). ServerProtocolError: an error or invalid MCP.
    """
    from chit.runtime.server_logs import last_line, open_server_log
    from chit.servers import Registry
    from chit.servers.tools import ServerProtocolError, ServerUnreachable, client_spec
    from chit.tasks.client import TaskClient, TaskError, TransientError

    resolved = Registry.for_home(home).resolve(server)
    stderr = open_server_log(home, server) if resolved.transport == "stdio" else None
    where = f"server {server!r}"

    def hint() -> str:
        line = last_line(home, server)
        return f" (server stderr: {line}; see `chit logs {server}`)" if line else ""

    try:
        with anyio.fail_after(timeout):
            async with TaskClient(
                client_spec(resolved, stderr), read_timeout=min(timeout, 30.0)
            ) as client:
                listed = await client.list_tools()
                summary = client.server_summary()
    except TimeoutError:
        raise ServerUnreachable(f"{where} did not answer within {timeout:g} s{hint()}") from None
    except TransientError as exc:
        raise ServerUnreachable(f"{where} is unreachable: {exc.message}{hint()}") from None
    except TaskError as exc:
        raise ServerProtocolError(f"{where}: {exc}") from None
    except OSError as exc:  # e.g. the command does not exist
        raise ServerUnreachable(f"{where} could not be started: {exc}") from None
    return tools_info(server, summary, listed)


def _live_by_server(sup: Supervisor) -> dict[str, int]:
    from chit.store.db import fetch_all

    rows = fetch_all(
        sup.store.db, "SELECT server, count(*) AS n FROM receipts WHERE active = 1 GROUP BY server"
    )
    return {str(r["server"]): int(r["n"]) for r in rows}


def tools_info(server: str, summary: Any, listed: list[Any]) -> ToolsInfo:
    """Build the engine's tools description from the task client's answers."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from chit.tasks import wire

    modern = summary.protocol_version in MODERN_PROTOCOL_VERSIONS
    return ToolsInfo(
        server=server,
        server_name=summary.name,
        server_version=summary.version,
        protocol_version=summary.protocol_version,
        generation=summary.generation,
        extension_declared=(summary.generation == wire.PROTOCOL_2026) if modern else None,
        tasks_detail=summary.tasks_detail,
        tools=tuple(
            ToolInfo(
                name=t.name,
                title=t.title,
                description=t.description,
                input_schema=dict(t.input_schema or {}),
                task_support=str(t.task_support),
            )
            for t in listed
        ),
    )
