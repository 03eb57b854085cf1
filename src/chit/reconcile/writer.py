"""Applying events to stored receipts: optimistic concurrency, jitter, change callbacks.

Every write reads the receipt, folds the events through ``transitions.apply`` and writes
the result with ``expected_version``; a concurrent writer (the CLI answering while the
daemon polls) makes it re-read and re-apply instead of overwriting.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import timedelta

from chit import clock
from chit.receipts import Event, Observation, Receipt, apply
from chit.store import StaleWrite, Store

log = logging.getLogger("chit.reconcile")

ChangeCallback = Callable[[Receipt | None, Receipt, tuple[str, ...]], None]
"""Called after every committed change: (before, after, changed fields)."""

JITTER = 0.1
"""Each scheduled check moves later by up to 10 % of its interval, so tasks created together
do not all poll in the same instant."""

_MAX_ATTEMPTS = 8


class ReceiptWriter:
    """Writes events to receipts and tells subscribers what changed."""

    def __init__(self, store: Store, on_change: ChangeCallback | None = None) -> None:
        """Write through ``store``; ``on_change`` hears every committed change."""
        self.store = store
        self._on_change = on_change
        self._rng = random.Random()

    def notify(self, before: Receipt | None, after: Receipt, changes: tuple[str, ...]) -> None:
        """Tell the subscriber about a change (its exceptions never reach the engine)."""
        if self._on_change is None:
            return
        try:
            self._on_change(before, after, changes)
        except Exception:  # a broken subscriber must not kill the reconciler
            log.exception("receipt change callback raised")

    def apply(
        self, receipt_id: str, events: Sequence[Event], *, wipe_handle: bool = False
    ) -> Receipt:
        """Apply ``events`` in order and commit them with their timeline rows.

        Returns:
            The receipt as stored afterwards (unchanged when no event applied).

        Raises:
            RecordNotFound: no such receipt.
        """
        for _attempt in range(_MAX_ATTEMPTS):
            before = self.store.receipts.require(receipt_id)
            now = clock.now()
            current = before
            observations: list[Observation] = []
            changes: list[str] = []
            for event in events:
                step = apply(current, event, now)
                observations.append(step.observation)
                changes.extend(step.changes)
                current = step.receipt
            if current is before:
                if observations:
                    self.store.observations.append(*observations)
                return before
            current = self._jitter(before, current)
            try:
                stored = self.store.receipts.update(
                    current, observations, expected_version=before.version, wipe_handle=wipe_handle
                )
            except StaleWrite:
                continue  # someone else wrote in between: re-read and re-apply
            self.notify(before, stored, tuple(dict.fromkeys(changes)))
            return stored
        raise StaleWrite(f"receipt {receipt_id} kept changing; gave up after {_MAX_ATTEMPTS} tries")

    def _jitter(self, before: Receipt, after: Receipt) -> Receipt:
        nxt = after.next_check_at
        if nxt is None or after.is_terminal or nxt == before.next_check_at:
            return after
        span = (nxt - clock.now()).total_seconds()
        if span <= 0:
            return after
        # Only later, never sooner: the floor of the poll interval stays a floor.
        shift = self._rng.uniform(0.0, JITTER) * span
        return after.model_copy(update={"next_check_at": nxt + timedelta(seconds=shift)})
