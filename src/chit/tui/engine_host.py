"""The TUI as a client of the home's engine: the daemon's by default, in process otherwise.

The TUI's :class:`~chit.tui.backend.Backend` speaks to a synchronous "host" from its
thread workers. :class:`EngineHost` is that host over any :class:`chit.engine.Engine`,
run on its own thread by :class:`chit.engine.blocking.BlockingEngine`:

* by default the daemon's client (``RemoteEngine``): every server session (a stdio
  server's process included) belongs to the daemon, so quitting the TUI stops nothing;
* with ``--no-daemon`` a reconciling ``LocalEngine`` in this process.

Engine events (``ReceiptUpdate``, ``ServerUpdate``, ``Resync``) reach the callback on
the engine's thread; the app hops them to the UI thread. No Textual here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from chit.engine.blocking import BlockingEngine
from chit.engine.models import (
    ProtocolMessage,
    ReceiptUpdate,
    ReconcileSummary,
    Resync,
    ServerStatus,
    ToolsInfo,
)
from chit.home import Home
from chit.receipts import Receipt

log = logging.getLogger(__name__)

RECONNECT_S = 1.0
"""Seconds between attempts to reach the daemon again after it went away."""


class EngineHost:
    """Synchronous engine calls for the TUI's workers, and its event subscription.

    Args:
        opener: opens the engine (an async context manager), e.g. ``RemoteEngine.open``.
        remote: the engine is the daemon's (reconnect when it goes away).
        owned: close the engine with the TUI (False: its owner, e.g. ``chit demo``,
            closes it).
    """

    def __init__(
        self,
        opener: Callable[[], Any],
        *,
        remote: bool,
        owned: bool = True,
        engine: BlockingEngine | None = None,
    ) -> None:
        self._opener = opener
        self.remote = remote
        self._owned = owned
        self.engine = engine if engine is not None else BlockingEngine.start(opener)
        self._callback: Callable[[Any], None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._cursor: int | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()

    @classmethod
    def start(cls, home: Home, *, use_daemon: bool = True, options: Any = None) -> EngineHost:
        """Open the home's engine (the daemon started on demand, or one in process).

        Raises:
            DaemonUnavailable: no daemon answers and none could be started (exit 6).
            ChitError: the daemon (or the engine here) could not start, and why.
        """
        if use_daemon:
            from chit.engine.remote import RemoteEngine

            return cls(lambda: RemoteEngine.open(home, client="tui"), remote=True)
        from chit.engine.local import LocalEngine

        return cls(lambda: LocalEngine.open(home, options=options, run=True), remote=False)

    # ------------------------------------------------------------------ state
    @property
    def is_viewer(self) -> bool:
        """True when an in-process engine found another process holding the lease."""
        supervisor = getattr(self.engine.engine, "supervisor", None)
        if self.remote or supervisor is None:
            return False
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # run() takes the lease right after start
            if self.engine.on_loop(lambda: supervisor.lease.held):
                return False
            time.sleep(0.05)
        return self.engine.on_loop(supervisor.lease.holder) is not None

    # ------------------------------------------------------------------ events
    def subscribe(self, callback: Callable[[Any], None]) -> None:
        """Deliver every engine event to ``callback`` (on the engine's thread)."""
        self._callback = callback
        self._subscribe()

    def _subscribe(self) -> None:
        callback = self._callback
        if callback is None:
            return

        def relay(event: Any) -> None:
            if isinstance(event, ReceiptUpdate | Resync):
                self._cursor = event.cursor or self._cursor
            callback(event)

        self._unsubscribe = self.engine.subscribe(
            relay, since=self._cursor, on_end=self._stream_ended
        )

    def _stream_ended(self) -> None:
        """The daemon went away (or restarted): reach it again, then catch up."""
        if self._closed.is_set() or not self.remote:
            return
        if self._callback is not None:
            self._callback(Disconnected("chit's daemon went away; reconnecting"))
        threading.Thread(target=self._reconnect, name="chit-tui-reconnect", daemon=True).start()

    def _reconnect(self) -> None:
        while not self._closed.wait(RECONNECT_S):
            try:
                fresh = BlockingEngine.start(self._opener)
            except Exception as exc:  # still gone: try again shortly
                log.info("daemon not reachable yet: %s", exc)
                continue
            with self._lock:
                old, self.engine = self.engine, fresh
            _close_quietly(old)
            self._subscribe()
            if self._callback is not None:  # what changed meanwhile came with since=cursor
                self._callback(Resync(cursor=self._cursor or 0, reason="reconnected"))
            return

    # ------------------------------------------------------------------ actions
    def answer(
        self, receipt_id: str, key: str, action: str, content: dict[str, Any] | None
    ) -> Receipt:
        """Accept (with content), decline or cancel one input request."""
        return self.engine.answer(
            receipt_id,
            key,
            content if action == "accept" else None,
            decline=action == "decline",
            cancel=action == "cancel",
        )

    def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel the task."""
        return self.engine.cancel(receipt_id)

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
    ) -> Receipt:
        """Start ``tool`` as a task; returns the receipt."""
        return self.engine.call(server, tool, arguments, purpose=purpose, work_ref=work_ref)

    def accept(self, receipt_id: str) -> Receipt:
        """Accept an outcome."""
        return self.engine.accept(receipt_id)

    def reject(self, receipt_id: str, why: str) -> Receipt:
        """Reject an outcome with a reason."""
        return self.engine.reject(receipt_id, why)

    def reopen(self, receipt_id: str) -> Receipt:
        """Take back a verdict: the outcome waits for judgment again."""
        return self.engine.reopen(receipt_id)

    def reconcile_once(self) -> ReconcileSummary:
        """One reconciliation pass (the daemon's, when it is the engine)."""
        return self.engine.reconcile_now()

    # ------------------------------------------------------------------ servers
    def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """Describe ``server``'s tools through the engine's session of it."""
        return self.engine.tools(server, timeout=timeout)

    def status(self) -> list[ServerStatus]:
        """Every registered server with its session's state and connected proxy hosts."""
        return self.engine.servers()

    def protocol_log(self, server: str, limit: int = 200) -> list[ProtocolMessage]:
        """The last JSON-RPC messages the engine exchanged with ``server`` (redacted)."""
        return self.engine.protocol_log(server, limit=limit)

    def close(self) -> None:
        """Stop the subscription; close the engine when this host owns it."""
        self._closed.set()
        stop, self._unsubscribe = self._unsubscribe, None
        if stop is not None:
            stop()
        if self._owned:
            _close_quietly(self.engine)


class Disconnected:
    """The engine's event stream ended (the daemon went away); a reconnect is under way."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _close_quietly(engine: BlockingEngine) -> None:
    try:
        engine.close()
    except Exception:  # shutting down or already gone: report, never block the exit
        log.debug("engine did not close cleanly", exc_info=True)
