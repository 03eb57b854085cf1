"""The TUI's one door to the core: store reads, the Supervisor's actions, the mode.

No Textual here. Every method may block (SQLite, MCP), so screens call them from thread
workers only. Each call opens its own store connection on the calling thread (cheap: a
connect and four pragmas) and closes it, so no connection ever crosses threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from chit import clock
from chit.errors import ChitError, Conflict, ExitCode
from chit.home import Home
from chit.receipts import (
    Acceptance,
    AcceptanceDecided,
    AcceptanceState,
    AnswerStatus,
    Receipt,
    apply,
)
from chit.store import Store, ThreadLocalStore
from chit.tui.probe import TIMEOUT_S, Probe, from_tools, probe

log = logging.getLogger(__name__)


class ReadOnly(ChitError):
    """An action was asked for while the TUI is read-only."""

    exit_code = ExitCode.CONFLICT


@dataclass(frozen=True)
class Mode:
    """How the TUI runs: what may be changed and what the banner must say.

    Attributes:
        readonly: No action changes anything (``--readonly``, key store unavailable).
        banner: A warning shown on every screen (None: no banner).
        note: A quiet note shown in the status line (e.g. the demo's memory key store).
        viewer: Another process (``chit daemon``) reconciles; this TUI only watches.
    """

    readonly: bool = False
    banner: str | None = None
    note: str | None = None
    viewer: bool = False


@dataclass
class Backend:
    """Store access plus the Supervisor's operations, for one home.

    Args:
        home: the chit home.
        mode: read-only / viewer / banner.
        supervisor: the running ``chit.runtime.Supervisor`` (None: store-only).
    """

    home: Home
    mode: Mode = field(default_factory=Mode)
    supervisor: Any | None = None
    _readers: ThreadLocalStore | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ reading
    @contextmanager
    def store(self) -> Iterator[Store]:
        """Open a store connection for this thread and close it afterwards."""
        # Read-only mode never writes, so it reads without writing too: a home on a
        # read-only mount (or one it may not migrate) still shows its receipts.
        store = Store.open_readonly(self.home) if self.mode.readonly else Store.open(self.home)
        try:
            yield store
        finally:
            store.close()

    def reader(self) -> Store:
        """This thread's long-lived store connection (worker threads are pooled).

        The tick's store check runs every second; opening a connection each time would
        cost more than the check itself.
        """
        if self._readers is None:
            self._readers = ThreadLocalStore(self.home)
        return self._readers.get()

    def questions_marker(self) -> object:
        """Changes whenever the sidecar store may have changed (two ``stat`` calls)."""
        marks: list[tuple[int, int] | None] = []
        for path in (
            self.home.sidecar_db_path,
            self.home.sidecar_db_path.with_name("sidecar.db-wal"),
        ):
            try:
                st = path.stat()
            except OSError:
                marks.append(None)
            else:
                marks.append((st.st_mtime_ns, st.st_size))
        return tuple(marks)

    def questions(self) -> list[Any]:
        """Pending ``work_ask`` decisions (``chit.sidecar.decisions.Decision``), oldest first.

        An unreadable sidecar store must not blank the receipts, so its errors are logged
        and read as "no questions".
        """
        from chit.sidecar.decisions import open_decisions

        try:
            return open_decisions(self.home)
        except ChitError:
            log.warning("sidecar decisions unreadable", exc_info=True)
            return []

    def subscribe(self, callback: Callable[[Any], None]) -> None:
        """Forward the Supervisor's events to ``callback`` (no-op without one)."""
        if self.supervisor is not None and hasattr(self.supervisor, "subscribe"):
            self.supervisor.subscribe(callback)

    @property
    def engine_events(self) -> bool:
        """True when the engine tells every receipt change (the daemon's feed sees other
        processes' writes too), so nothing needs to look at the store on a timer."""
        return self.supervisor is not None and hasattr(self.supervisor, "status")

    # ------------------------------------------------------------------ acting
    def _guard(self, what: str) -> None:
        if self.mode.readonly:
            raise ReadOnly(f"read-only: cannot {what}")

    def _supervisor(self, what: str) -> Any:
        self._guard(what)
        if self.supervisor is None:
            raise ChitError(f"cannot {what}: no supervisor is running in this session")
        return self.supervisor

    def answer(
        self, receipt_id: str, key: str, action: str, content: dict[str, Any] | None
    ) -> None:
        """Answer (``accept``), decline or cancel one pending input request."""
        self._supervisor("answer").answer(receipt_id, key, action, content)

    def decide(self, decision_id: str, answer: Any) -> None:
        """Answer an agent's ``work_ask`` question; its task completes with ``answer``."""
        from chit.sidecar.decisions import answer_decision

        self._guard("answer")
        answer_decision(self.home, decision_id, answer)

    def withdraw(self, decision_id: str) -> None:
        """Decline an agent's question: the sidecar cancels it and the asking task ends."""
        from chit.sidecar.decisions import withdraw_decision

        self._guard("answer")
        if not withdraw_decision(self.home, decision_id):
            raise Conflict(f"decision {decision_id} is no longer pending")

    def cancel(self, receipt_id: str) -> None:
        """Ask the server to cancel the task (the posture records request and outcome)."""
        self._supervisor("cancel").cancel(receipt_id)

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str | None,
        work_ref: str | None = None,
    ) -> Any:
        """Start ``tool`` on ``server`` as a task; returns what the Supervisor returns."""
        return self._supervisor("start a call").call(
            server, tool, arguments, purpose=purpose, work_ref=work_ref
        )

    def reconcile_now(self) -> None:
        """Check every live receipt now (no-op in a viewer: the daemon does it)."""
        if self.supervisor is not None and not self.mode.viewer:
            self.supervisor.reconcile_once()

    def accept(self, receipt_id: str) -> Receipt:
        """Accept a terminal receipt's outcome as the user."""
        return self._decide(receipt_id, AcceptanceState.ACCEPTED, None)

    def reject(self, receipt_id: str, why: str) -> Receipt:
        """Reject a terminal receipt's outcome, with the reason the agent will see."""
        if not why.strip():
            raise ChitError("a rejection needs a reason")
        return self._decide(receipt_id, AcceptanceState.REJECTED, why.strip())

    def undo_verdict(self, receipt_id: str, before: Acceptance) -> Receipt:
        """Put a receipt's acceptance back to what it was before the last verdict."""
        sup = self.supervisor
        if before.state is AcceptanceState.PENDING and sup is not None and hasattr(sup, "reopen"):
            self._guard("undo")
            done = sup.reopen(receipt_id)
            return done if isinstance(done, Receipt) else self._read(receipt_id)
        return self._decide(receipt_id, before.state, before.why, verb="undo")

    def _decide(
        self,
        receipt_id: str,
        state: AcceptanceState,
        why: str | None,
        verb: Literal["accept", "reject", "undo"] | None = None,
    ) -> Receipt:
        verb = verb or ("accept" if state is AcceptanceState.ACCEPTED else "reject")
        self._guard(verb)
        if verb != "undo" and self.supervisor is not None and hasattr(self.supervisor, verb):
            method = self.supervisor.accept if verb == "accept" else self.supervisor.reject
            done = method(receipt_id) if why is None else method(receipt_id, why)
            return done if isinstance(done, Receipt) else self._read(receipt_id)
        # Acceptance is a local verdict (no server round trip), so the store records it
        # directly; the write is version-checked like the engine's.
        with self.store() as store:
            receipt = store.receipts.require(receipt_id)
            if not receipt.is_terminal:
                raise Conflict(f"cannot {verb} a {receipt.state.value} task: wait for it to end")
            event = AcceptanceDecided(
                state=state, check=receipt.acceptance.check, why=why, decided_by="user"
            )
            result = apply(receipt, event, clock.now())
            if result.receipt is receipt:
                raise Conflict(f"receipt is already {receipt.acceptance.state.value}")
            return store.receipts.update(
                result.receipt, [result.observation], expected_version=receipt.version
            )

    def _read(self, receipt_id: str) -> Receipt:
        with self.store() as store:
            return store.receipts.require(receipt_id)

    # ------------------------------------------------------------------ servers
    def servers(self) -> list[Any]:
        """The registered servers (``ServerSpec``), sorted by name."""
        from chit.servers import Registry

        return list(Registry.for_home(self.home).servers().values())

    def probe(self, name: str) -> Probe:
        """Connect to server ``name``: protocol, task support, tools and their schemas.

        Through the engine's session when there is one (the daemon's: no second server
        process); a read-only TUI connects once by itself.
        """
        if self.supervisor is not None and hasattr(self.supervisor, "tools"):
            return from_tools(self.supervisor.tools(name, timeout=TIMEOUT_S))
        return probe(self.home, name)

    def server_status(self) -> dict[str, Any]:
        """Each server's session as the engine sees it (``ServerStatus``); {} without one."""
        if self.supervisor is None or not hasattr(self.supervisor, "status"):
            return {}
        return {s.name: s for s in self.supervisor.status()}

    def protocol_log(self, server: str, limit: int = 200) -> list[Any]:
        """The JSON-RPC messages the engine exchanged with ``server`` (``ProtocolMessage``).

        Raises:
            ChitError: no engine runs for this TUI (read-only), so nothing was exchanged.
        """
        if self.supervisor is None or not hasattr(self.supervisor, "protocol_log"):
            raise ChitError("no protocol log: chit's engine is not running for this TUI")
        return list(self.supervisor.protocol_log(server, limit))

    def not_task_calls(self, limit: int = 20) -> list[Receipt]:
        """Recent calls that were answered synchronously, with the reason (newest first)."""
        with self.store() as store:
            page = store.receipts.list(limit=500)
        return [r for r in page.items if r.synchronous][:limit]

    def close(self) -> None:
        """Stop the Supervisor this backend hosts, if any, and close the readers."""
        if self._readers is not None:
            self._readers.close_all()
        sup, self.supervisor = self.supervisor, None
        if sup is not None and hasattr(sup, "close"):
            try:
                sup.close()
            except Exception:  # shutting down: report, never block the exit
                log.exception("supervisor did not close cleanly")


ANSWER_ACTIONS = {
    "accept": AnswerStatus.ANSWERED,
    "decline": AnswerStatus.DECLINED,
    "cancel": AnswerStatus.CANCELLED,
}
"""The three elicitation answers and the status each leaves on the request."""
