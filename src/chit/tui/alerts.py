"""Which changes deserve a toast and a bell: found by comparing two snapshots.

Comparing snapshots (rather than only listening to the engine's events) also catches
changes the store check found, made by another process. The first snapshot only sets
the baseline, plus one summary of waiting prompts. A server that becomes unreachable
gets one toast (with the reason in words) until it recovers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from chit.receipts import LifecycleState, Receipt
from chit.tui.view import Row, Snapshot, near_expiry

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Alert:
    """One toast."""

    title: str
    message: str
    severity: Severity = "information"


def _name(r: Row | Receipt) -> str:
    return f"{r.server}/{r.tool} {r.receipt_id[-6:]}"


@dataclass
class AlertTracker:
    """Remembers states, prompts and expiry warnings across snapshots."""

    states: dict[str, LifecycleState] = field(default_factory=dict)
    prompts: set[tuple[str, str]] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)
    unreachable: set[str] = field(default_factory=set)
    primed: bool = False

    def diff(self, snapshot: Snapshot) -> list[Alert]:
        """Return the alerts for what changed since the previous snapshot."""
        alerts: list[Alert] = []
        prompts = {(p.receipt.receipt_id, p.request.key) for p in snapshot.prompts}
        # Agents' questions share the set under a key no receipt id can take.
        prompts |= {("ask", q.decision_id) for q in snapshot.questions}
        if not self.primed:
            self.primed = True
            if prompts:
                alerts.append(
                    Alert(
                        "Input required",
                        f"{len(prompts)} prompt(s) wait in the inbox (i)",
                        "warning",
                    )
                )
        else:
            for prompt in snapshot.prompts:
                if (prompt.receipt.receipt_id, prompt.request.key) not in self.prompts:
                    text = prompt.request.message or prompt.request.key
                    alerts.append(
                        Alert("Input required", f"{_name(prompt.receipt)}: {text}", "warning")
                    )
            for question in snapshot.questions:
                if ("ask", question.decision_id) not in self.prompts:
                    text = f"{question.work_label}: {question.question}"
                    alerts.append(Alert("Agent question", text, "warning"))
        self.prompts = prompts
        down = {h.server for h in snapshot.health}
        for health in snapshot.health:
            if health.server not in self.unreachable:
                alerts.append(
                    Alert(
                        "Server unreachable",
                        f"{health.server}: {health.reason}. chit keeps trying"
                        f" ({health.receipts} task(s) wait on it).",
                        "warning",
                    )
                )
        self.unreachable = down
        for receipt in snapshot.rows:
            before = self.states.get(receipt.receipt_id)
            self.states[receipt.receipt_id] = receipt.state
            if before is not None and before != receipt.state and receipt.is_terminal:
                alerts.append(self._terminal(receipt))
            if near_expiry(receipt, snapshot.now) and receipt.receipt_id not in self.warned:
                self.warned.add(receipt.receipt_id)
                alerts.append(
                    Alert(
                        "Near expiry",
                        f"{_name(receipt)}: retrieve or act before its TTL ends",
                        "warning",
                    )
                )
        return alerts

    @staticmethod
    def _terminal(r: Row) -> Alert:
        if r.state is LifecycleState.COMPLETED:
            if r.error:
                return Alert("Completed with an error", _name(r), "error")
            return Alert("Completed", _name(r))
        if r.state is LifecycleState.FAILED:
            return Alert("Failed", f"{_name(r)}: {r.status_message or ''}".strip(), "error")
        return Alert("Cancelled", _name(r), "warning")
