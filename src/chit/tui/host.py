"""Hosting the (async) Supervisor beside Textual: its own event loop thread, sync calls.

The Supervisor owns one store connection and an anyio task group, so it must live on
one thread. An anyio blocking portal gives it that thread; the TUI's thread workers call
``portal.call(...)``, which runs the coroutine there and blocks only the worker. Engine
events are published on the portal thread and forwarded with ``post_message`` (which is
thread-safe), so no widget is ever touched off the UI thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from chit.home import Home

log = logging.getLogger(__name__)


class SupervisorHost:
    """A running Supervisor (reconciling, or a viewer) with synchronous methods.

    Use :meth:`start`; call :meth:`close` on exit.
    """

    def __init__(self, stack: ExitStack, portal: BlockingPortal, supervisor: Any) -> None:
        self._stack = stack
        self._portal = portal
        self.supervisor = supervisor
        self._stop: anyio.Event | None = None

    @classmethod
    def start(cls, home: Home, *, run: bool = True, options: Any = None) -> SupervisorHost:
        """Open the Supervisor on its own thread and start reconciling.

        Raises:
            KeyStoreUnavailable, DataKeyMissing: the vault cannot be unlocked.
        """
        from chit.runtime import Supervisor

        stack = ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal())
            cm: AbstractContextManager[Any] = portal.wrap_async_context_manager(
                Supervisor.open(home, options=options)
            )
            supervisor = stack.enter_context(cm)
        except BaseException:
            stack.close()
            raise
        host = cls(stack, portal, supervisor)
        if run:
            host._stop = portal.call(anyio.Event)
            portal.start_task_soon(supervisor.run, host._stop)
        return host

    # ------------------------------------------------------------------ state
    @property
    def is_viewer(self) -> bool:
        """True when another process holds the lease (this one only watches)."""
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # run() takes the lease right after start
            if self._portal.call(lambda: self.supervisor.lease.held):
                return False
            time.sleep(0.05)
        return self._portal.call(self.supervisor.lease.holder) is not None

    def subscribe(self, callback: Callable[[Any], None]) -> None:
        """Receive engine events (on the Supervisor's thread)."""
        self._portal.call(self.supervisor.subscribe, callback)

    # ------------------------------------------------------------------ actions
    def answer(self, receipt_id: str, key: str, action: str, content: dict[str, Any] | None) -> Any:
        """Accept (with content), decline or cancel one input request."""

        async def run() -> Any:
            return await self.supervisor.answer(
                receipt_id,
                key,
                content if action == "accept" else None,
                decline=action == "decline",
                cancel=action == "cancel",
            )

        return self._portal.call(run)

    def cancel(self, receipt_id: str) -> Any:
        """Ask the server to cancel the task."""
        return self._portal.call(self.supervisor.cancel, receipt_id)

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
    ) -> Any:
        """Start ``tool`` as a task; returns the receipt."""

        async def run() -> Any:
            return await self.supervisor.call(
                server, tool, arguments, purpose=purpose, work_ref=work_ref
            )

        return self._portal.call(run)

    def accept(self, receipt_id: str) -> Any:
        """Accept an outcome."""
        return self._portal.call(self.supervisor.accept, receipt_id)

    def reject(self, receipt_id: str, why: str) -> Any:
        """Reject an outcome with a reason."""
        return self._portal.call(self.supervisor.reject, receipt_id, why)

    def reconcile_once(self) -> Any:
        """One reconciliation pass (a viewer's pass does nothing)."""
        return self._portal.call(self.supervisor.reconcile_once)

    def close(self) -> None:
        """Stop reconciling, release the lease, close connections and the thread."""
        if self._stop is not None:
            try:
                self._portal.call(self._stop.set)
            except Exception:  # the loop is already gone
                log.debug("supervisor loop already stopped")
        self._stack.close()
