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
from typing import Any

from chit import clock
from chit.errors import ChitError, Conflict, ExitCode
from chit.home import Home
from chit.receipts import AcceptanceDecided, AcceptanceState, AnswerStatus, Receipt, apply
from chit.store import Store
from chit.tui.probe import Probe, probe

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

    # ------------------------------------------------------------------ reading
    @contextmanager
    def store(self) -> Iterator[Store]:
        """Open a store connection for this thread and close it afterwards."""
        store = Store.open(self.home)
        try:
            yield store
        finally:
            store.close()

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

    def accept(self, receipt_id: str) -> None:
        """Accept a terminal receipt's outcome as the user."""
        self._decide(receipt_id, AcceptanceState.ACCEPTED, None)

    def reject(self, receipt_id: str, why: str) -> None:
        """Reject a terminal receipt's outcome, with the reason the agent will see."""
        if not why.strip():
            raise ChitError("a rejection needs a reason")
        self._decide(receipt_id, AcceptanceState.REJECTED, why.strip())

    def _decide(self, receipt_id: str, state: AcceptanceState, why: str | None) -> None:
        verb = "accept" if state is AcceptanceState.ACCEPTED else "reject"
        self._guard(verb)
        if self.supervisor is not None and hasattr(self.supervisor, verb):
            method = self.supervisor.accept if verb == "accept" else self.supervisor.reject
            method(receipt_id) if why is None else method(receipt_id, why)
            return
        # Acceptance is a local verdict (no server round trip), so the store alone can
        # record it when no Supervisor runs (e.g. a viewer).
        with self.store() as store:
            receipt = store.receipts.require(receipt_id)
            if not receipt.is_terminal:
                raise Conflict(f"cannot {verb} a {receipt.state.value} task: wait for it to end")
            event = AcceptanceDecided(state=state, why=why, decided_by="user")
            result = apply(receipt, event, clock.now())
            if result.receipt is receipt:
                raise Conflict(f"receipt is already {receipt.acceptance.state.value}")
            store.receipts.update(result.receipt, [result.observation])

    # ------------------------------------------------------------------ servers
    def servers(self) -> list[Any]:
        """The registered servers (``ServerSpec``), sorted by name."""
        from chit.servers import Registry

        return list(Registry.for_home(self.home).servers().values())

    def probe(self, name: str) -> Probe:
        """Connect to server ``name``: protocol, task support, tools and their schemas."""
        return probe(self.home, name)

    def not_task_calls(self, limit: int = 20) -> list[Receipt]:
        """Recent calls that were answered synchronously, with the reason (newest first)."""
        with self.store() as store:
            page = store.receipts.list(limit=500)
        return [r for r in page.items if r.synchronous][:limit]

    def close(self) -> None:
        """Stop the Supervisor this backend hosts, if any."""
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
