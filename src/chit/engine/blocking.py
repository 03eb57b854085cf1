"""Any Engine, usable from plain threads: its own event loop thread, blocking methods.

For callers that are not async (a thread worker of the TUI, the demo's scripted agent):
:meth:`BlockingEngine.start` opens an engine (``RemoteEngine.open(home)``,
``LocalEngine.open(home, run=True)``) on a blocking portal's thread and every method
runs there, blocking only the calling thread. Events reach a callback on the portal
thread (hop to your own thread from there, e.g. Textual's ``post_message``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, ExitStack
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal, start_blocking_portal

from chit.engine.api import Engine
from chit.engine.models import (
    EngineEvent,
    ProtocolMessage,
    ReconcileSummary,
    ServerStatus,
    ToolsInfo,
)
from chit.receipts import Receipt

log = logging.getLogger("chit.engine")

T = TypeVar("T")


async def _plain(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


class BlockingEngine:
    """An Engine on its own thread, with blocking methods of the same names."""

    def __init__(self, stack: ExitStack, portal: BlockingPortal, engine: Engine) -> None:
        """Use :meth:`start`."""
        self._stack = stack
        self._portal = portal
        self.engine = engine

    @classmethod
    def start(cls, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> BlockingEngine:
        """Open ``opener()`` on a new thread; its errors are raised here."""
        stack = ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal())
            engine = stack.enter_context(portal.wrap_async_context_manager(opener()))
        except BaseException:
            stack.close()
            raise
        return cls(stack, portal, engine)

    def close(self) -> None:
        """Close the engine (and its subscriptions) and end the thread."""
        self._stack.close()

    def call(
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
        run = partial(
            self.engine.call,
            server,
            tool,
            arguments,
            purpose=purpose,
            work_ref=work_ref,
            ttl_ms=ttl_ms,
            accept_if=accept_if,
        )
        return self._portal.call(run)

    def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """See ``Engine.answer``."""
        run = partial(self.engine.answer, receipt_id, key, content, decline=decline, cancel=cancel)
        return self._portal.call(run)

    def cancel(self, receipt_id: str) -> Receipt:
        """See ``Engine.cancel``."""
        return self._portal.call(self.engine.cancel, receipt_id)

    def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """See ``Engine.accept``."""
        return self._portal.call(self.engine.accept, receipt_id, why)

    def reject(self, receipt_id: str, why: str) -> Receipt:
        """See ``Engine.reject``."""
        return self._portal.call(self.engine.reject, receipt_id, why)

    def reopen(self, receipt_id: str) -> Receipt:
        """See ``Engine.reopen``."""
        return self._portal.call(self.engine.reopen, receipt_id)

    def protocol_log(self, server: str, *, limit: int = 100) -> list[ProtocolMessage]:
        """See ``Engine.protocol_log``."""
        return self._portal.call(partial(self.engine.protocol_log, server, limit=limit))

    def on_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the plain function ``fn(*args)`` on the engine's thread (e.g. to read its state)."""
        return self._portal.call(partial(_plain, fn, *args))

    def receipt(self, receipt_id: str) -> Receipt:
        """See ``Engine.receipt``."""
        return self._portal.call(self.engine.receipt, receipt_id)

    def follow(self, receipt_id: str) -> Receipt:
        """See ``Engine.follow``."""
        return self._portal.call(self.engine.follow, receipt_id)

    def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """See ``Engine.tools``."""
        return self._portal.call(partial(self.engine.tools, server, timeout=timeout))

    def servers(self) -> list[ServerStatus]:
        """See ``Engine.servers``."""
        return self._portal.call(self.engine.servers)

    def reconcile_now(self) -> ReconcileSummary:
        """See ``Engine.reconcile_now``."""
        return self._portal.call(self.engine.reconcile_now)

    def subscribe(
        self,
        callback: Callable[[EngineEvent], None],
        *,
        receipt_id: str | None = None,
        since: int | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(event)`` (on the engine's thread) for every event; returns stop.

        ``on_end()`` runs (on the engine's thread) when the stream ends by itself, e.g.
        the daemon went away; never after ``stop``.
        """
        stop = self._portal.call(anyio.Event)

        async def pump(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    await stop.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                async with self.engine.events(receipt_id=receipt_id, since=since) as stream:
                    task_status.started()
                    async for event in stream:
                        try:
                            callback(event)
                        except Exception:  # a broken subscriber must not stop the stream
                            log.exception("event subscriber raised")
                tg.cancel_scope.cancel()
            if on_end is not None and not stop.is_set():
                try:
                    on_end()
                except Exception:
                    log.exception("event stream end handler raised")

        self._portal.start_task(pump)  # returns once subscribed (or raises why not)

        def unsubscribe() -> None:
            with contextlib.suppress(RuntimeError):  # the portal is already closed
                self._portal.call(stop.set)

        return unsubscribe
