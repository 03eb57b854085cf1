"""An in-process engine on its own thread, usable from another event loop (the TUI's).

The Supervisor does blocking SQLite work on its loop and keeps one store connection
bound to its thread, so a UI must not host it on its own loop. :class:`HostedEngine`
runs a :class:`LocalEngine` (reconciling) in a blocking portal's thread and implements
:class:`chit.engine.Engine` for callers on any other loop: each call hops to the portal
in a worker thread and back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream
from anyio.from_thread import BlockingPortal, start_blocking_portal

from chit.engine.local import LocalEngine
from chit.engine.models import (
    EngineEvent,
    ProtocolMessage,
    ReconcileSummary,
    ServerStatus,
    ToolsInfo,
)
from chit.home import Home
from chit.receipts import Receipt
from chit.runtime import SupervisorOptions

T = TypeVar("T")


class HostedEngine:
    """A reconciling LocalEngine on its own thread (implements ``chit.engine.Engine``).

    Start with :meth:`start` (blocking: opens the store and unlocks the vault); call
    :meth:`close` when done.
    """

    def __init__(self, stack: ExitStack, portal: BlockingPortal, engine: LocalEngine) -> None:
        self._stack = stack
        self._portal = portal
        self.local = engine

    @classmethod
    def start(
        cls,
        home: Home,
        *,
        environ: Mapping[str, str] | None = None,
        options: SupervisorOptions | None = None,
        run: bool = True,
    ) -> HostedEngine:
        """Open the engine on a new thread (reconciling unless ``run`` is False).

        Raises:
            KeyStoreUnavailable, DataKeyMissing: the vault cannot be unlocked.
        """
        stack = ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal())
            engine = stack.enter_context(
                portal.wrap_async_context_manager(
                    LocalEngine.open(home, environ=environ, options=options, run=run)
                )
            )
        except BaseException:
            stack.close()
            raise
        return cls(stack, portal, engine)

    def close(self) -> None:
        """Stop reconciling, close connections and the store, end the thread."""
        self._stack.close()

    async def _on_portal(self, fn: Callable[..., Awaitable[T]], *args: Any, **kw: Any) -> T:
        return await anyio.to_thread.run_sync(
            partial(self._portal.call, partial(fn, *args, **kw)), abandon_on_cancel=True
        )

    # --- the Engine protocol ----------------------------------------------------------

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
        return await self._on_portal(
            self.local.call,
            server,
            tool,
            arguments,
            purpose=purpose,
            work_ref=work_ref,
            ttl_ms=ttl_ms,
            accept_if=accept_if,
        )

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
        return await self._on_portal(
            self.local.answer, receipt_id, key, content, decline=decline, cancel=cancel
        )

    async def cancel(self, receipt_id: str) -> Receipt:
        """See ``Engine.cancel``."""
        return await self._on_portal(self.local.cancel, receipt_id)

    async def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """See ``Engine.accept``."""
        return await self._on_portal(self.local.accept, receipt_id, why)

    async def reject(self, receipt_id: str, why: str) -> Receipt:
        """See ``Engine.reject``."""
        return await self._on_portal(self.local.reject, receipt_id, why)

    async def reopen(self, receipt_id: str) -> Receipt:
        """See ``Engine.reopen``."""
        return await self._on_portal(self.local.reopen, receipt_id)

    async def protocol_log(self, server: str, *, limit: int = 100) -> list[ProtocolMessage]:
        """See ``Engine.protocol_log``."""
        return await self._on_portal(self.local.protocol_log, server, limit=limit)

    async def receipt(self, receipt_id: str) -> Receipt:
        """See ``Engine.receipt``."""
        return await self._on_portal(self.local.receipt, receipt_id)

    async def follow(self, receipt_id: str) -> Receipt:
        """See ``Engine.follow``."""
        return await self._on_portal(self.local.follow, receipt_id)

    async def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """See ``Engine.tools``."""
        return await self._on_portal(self.local.tools, server, timeout=timeout)

    async def servers(self) -> list[ServerStatus]:
        """See ``Engine.servers``."""
        return await self._on_portal(self.local.servers)

    async def reconcile_now(self) -> ReconcileSummary:
        """See ``Engine.reconcile_now``."""
        return await self._on_portal(self.local.reconcile_now)

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """See ``Engine.retry_intent``."""
        return await self._on_portal(
            self.local.retry_intent, request_key, arguments, ttl_ms=ttl_ms, accept_if=accept_if
        )

    async def abandon_intent(self, request_key: str) -> None:
        """See ``Engine.abandon_intent``."""
        await self._on_portal(self.local.abandon_intent, request_key)

    def events(
        self, *, receipt_id: str | None = None, since: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[EngineEvent]]:
        """See ``Engine.events``: the portal's stream, relayed onto the caller's loop."""
        return self._relay(receipt_id, since)

    @asynccontextmanager
    async def _relay(
        self, receipt_id: str | None, since: int | None
    ) -> AsyncIterator[ObjectReceiveStream[EngineEvent]]:
        send, receive = anyio.create_memory_object_stream[EngineEvent](1024)
        cm = self._portal.wrap_async_context_manager(
            self.local.events(receipt_id=receipt_id, since=since)
        )
        source = await anyio.to_thread.run_sync(cm.__enter__)

        def pull() -> EngineEvent:
            return self._portal.call(source.receive)

        async def relay() -> None:
            async with send:
                while True:
                    try:
                        event = await anyio.to_thread.run_sync(pull, abandon_on_cancel=True)
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        return
                    await send.send(event)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                try:
                    yield receive
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(cm.__exit__, None, None, None)
