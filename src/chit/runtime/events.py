"""The Supervisor's typed event bus: what changed, for the TUI and other subscribers.

Events are derived from committed receipt changes (never from raw server pushes), so a
subscriber sees exactly what the store holds. Callbacks run on the Supervisor's event
loop thread; a callback that raises is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from chit import clock
from chit.receipts import InputRequest, Intent, LifecycleState, Receipt, RetrievalCondition

log = logging.getLogger("chit.runtime")


@dataclass(frozen=True)
class ReceiptChanged:
    """Any committed change (``before`` is None for a new receipt)."""

    receipt: Receipt
    before: Receipt | None
    changes: tuple[str, ...]


@dataclass(frozen=True)
class InputRequired:
    """A new input request arrived and waits for a person."""

    receipt: Receipt
    request: InputRequest


@dataclass(frozen=True)
class Completed:
    """The task reached ``completed`` (check ``receipt.outcome`` before claiming success)."""

    receipt: Receipt


@dataclass(frozen=True)
class Failed:
    """The task reached ``failed``."""

    receipt: Receipt


@dataclass(frozen=True)
class Cancelled:
    """The task reached ``cancelled``."""

    receipt: Receipt


@dataclass(frozen=True)
class NearExpiry:
    """A live task will pass its TTL soon (within a minute or a tenth of its TTL)."""

    receipt: Receipt


@dataclass(frozen=True)
class RetrievalProblem:
    """The task became unreachable, vanished, expired or incompatible."""

    receipt: Receipt
    condition: RetrievalCondition


@dataclass(frozen=True)
class IntentUnknown:
    """A call's outcome is unknown (crash or lost reply): retry or abandon it."""

    intent: Intent


EngineEvent = (
    ReceiptChanged
    | InputRequired
    | Completed
    | Failed
    | Cancelled
    | NearExpiry
    | RetrievalProblem
    | IntentUnknown
)
Subscriber = Callable[[EngineEvent], None]

_TERMINAL_EVENTS: dict[LifecycleState, type[Completed] | type[Failed] | type[Cancelled]] = {
    LifecycleState.COMPLETED: Completed,
    LifecycleState.FAILED: Failed,
    LifecycleState.CANCELLED: Cancelled,
}


def derive(before: Receipt | None, after: Receipt) -> list[EngineEvent]:
    """The typed events one committed change amounts to (``ReceiptChanged`` excluded)."""
    events: list[EngineEvent] = []
    old_keys = {q.key for q in before.pending_inputs} if before else set()
    events += [InputRequired(after, q) for q in after.pending_inputs if q.key not in old_keys]
    was_terminal = before is not None and before.is_terminal
    if after.is_terminal and not was_terminal:
        events.append(_TERMINAL_EVENTS[after.state](after))
    old_condition = before.retrieval if before else RetrievalCondition.FRESH
    if after.retrieval is not old_condition and after.retrieval is not RetrievalCondition.FRESH:
        events.append(RetrievalProblem(after, after.retrieval))
    if _near_expiry(after) and not (before is not None and _near_expiry(before)):
        events.append(NearExpiry(after))
    return events


def _near_expiry(receipt: Receipt) -> bool:
    if receipt.is_terminal or receipt.expires_at is None:
        return False
    window = timedelta(seconds=60)
    if receipt.ttl_ms:
        window = min(window, timedelta(milliseconds=receipt.ttl_ms / 10))
    return receipt.expires_at - clock.now() <= window


class EventBus:
    """Delivers engine events to subscribers, in order, on the publishing thread."""

    def __init__(self) -> None:
        """Start with no subscribers."""
        self._subscribers: list[Subscriber] = []

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Add ``callback``; return a function that removes it again."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, event: EngineEvent) -> None:
        """Deliver ``event`` to every subscriber."""
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken subscriber must not stop the engine
                log.exception("event subscriber raised")

    def receipt_changed(
        self, before: Receipt | None, after: Receipt, changes: tuple[str, ...]
    ) -> None:
        """Publish a committed change and the typed events it implies."""
        if not self._subscribers:
            return  # nobody to tell: no events made (a change per check at 1,000 tasks)
        self.publish(ReceiptChanged(after, before, changes))
        for event in derive(before, after):
            self.publish(event)
