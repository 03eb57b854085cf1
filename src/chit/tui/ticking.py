"""The feed's clock tick and its cheap check for what other processes wrote.

A mixin of :class:`~chit.tui.feed.Feed`. The tick moves the clock and checks the store
only for what no event tells: work records and agents' questions (and, with no engine,
receipts other processes wrote), with two index look-ups and two ``stat`` calls.
Nothing is re-read when nothing changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from chit import clock
from chit.receipts import Receipt
from chit.tui import loader
from chit.tui.loader import Marks
from chit.tui.model import LiveModel
from chit.tui.view import Question, clock_marks

if TYPE_CHECKING:
    from chit.tui.app import ChitApp


FAULT_ENV = "CHIT_TUI_FAULT"
"""Test-only: ``tick`` makes the first clock tick after the first load raise, unhandled,
so a test can see what a real crash does (the exit code, the log, the demo's home)."""

COARSE_S = 15.0
"""Seconds a text that moves by the minute may lag behind the clock."""

RECORDS_EVERY = 5
"""With the engine's events, the store is looked at for work records every this many ticks."""


@dataclass(frozen=True)
class Changes:
    """What the store check found since the model's marks."""

    receipts: tuple[Receipt, ...]
    marks: Marks
    records: bool
    open_records: tuple[Any, ...] | None
    questions: tuple[Question, ...] | None
    side: object


class Ticking:
    """The tick and the store check of :class:`~chit.tui.feed.Feed`."""

    model: LiveModel
    paused: bool
    publish_pending: bool
    _side: object
    _ticks: int
    _fault: str

    def _app(self) -> ChitApp:
        return self  # type: ignore[return-value]

    def init_ticking(self) -> None:
        """No tick yet; the test-only fault read from the environment."""
        self._ticks = 0
        self._fault = os.environ.get(FAULT_ENV, "")

    if TYPE_CHECKING:

        def request_publish(self) -> None:
            """The feed's (:meth:`chit.tui.feed.Feed.request_publish`)."""

    def tick(self) -> None:
        """Move the clock (near-expiry, "observed 12 s ago") and check for other writers.

        A tick that changes nothing on screen publishes nothing: the snapshot is built
        (cheap: the index's window) and published only when a row changed group or a
        clock-driven text moved (:func:`~chit.tui.view.clock_marks`). When only a clock
        text moved, what is shown is published again at ``now`` — the same rows, so the
        table computes its time cells alone and repaints the ones that changed (an open
        TUI whose receipts say "12 s ago" stays under 1 % of a core).
        """
        if not self.model.ready:
            return
        if self._fault == "tick":
            # Test-only (docs/tui.md): a bug outside any worker, as a real crash would be.
            raise RuntimeError(f"{FAULT_ENV}=tick: a fault injected for a crash test")
        now = clock.now()
        index = self.model.index  # None while the first page waits for it: no moves yet
        moved = index.advance(now) if index is not None else []
        if moved or self.publish_pending:
            self.request_publish()
        elif self._clock_moved(now):
            self._restamp(now)
        self._ticks += 1
        backend = self._app().backend
        # Receipts come as events; an agent's question shows within a tick (two ``stat``
        # calls here); work records are looked at every few ticks.
        quiet = backend.engine_events and self._ticks % RECORDS_EVERY
        if not (quiet and backend.questions_marker() == self._side):
            self.check_now()

    def _clock_moved(self, now: Any) -> bool:
        """A clock-driven text on screen moved: by the second at once, by the minute (or
        slower) within :data:`COARSE_S` (such a text is a minute wide anyway, and rows
        observed at different seconds would otherwise repaint the screen every tick)."""
        shown = self._app().snapshot
        if not self.model.ready or shown.now.year < 2000:
            return True
        coarse = (now - shown.now).total_seconds() >= COARSE_S
        later = replace(shown, now=now)
        return clock_marks(later, coarse=coarse) != clock_marks(shown, coarse=coarse)

    def _restamp(self, now: Any) -> None:
        """Show what is shown at ``now``: nothing but the clock moved since it was built.

        Nothing is pending (an event, a filter, a page, a read would have asked for a
        publish), so a build now would hold the same rows; the shown snapshot at a later
        ``now`` is that build without the work. Paused, or before the first snapshot,
        the ordinary publish decides.
        """
        app = self._app()
        shown = app.snapshot
        if self.paused or shown.now.year < 2000:
            self.request_publish()
            return
        app.publish(replace(shown, now=now))

    def check_now(self) -> None:
        """Look for what other processes wrote (receipts, work records, questions)."""
        if not self.model.ready:
            return
        self._app().submit(
            self._check,
            self.model.marks,
            self._side,
            description="Checking the store",
            done=self._changes,
            group="check",
            exclusive=True,
        )

    def _check(self, marks: Marks, side: object) -> Changes | None:
        backend = self._app().backend
        store = backend.reader()
        now = loader.read_marks(store)
        receipts: list[Receipt] = []
        # With the engine's events every receipt change arrives as one (the daemon's feed
        # sees other processes' writes too): the store is looked at only for what no event
        # tells, the work records and the agents' questions.
        if (
            not backend.engine_events
            and now.status_at is not None
            and (marks.status_at is None or now.status_at > marks.status_at)
        ):
            receipts = loader.changed_since(store, marks.status_at)
        records = now.work != marks.work
        open_records = loader.read_open_records(store) if records else None
        side_now = backend.questions_marker()
        questions = None
        if side_now != side:
            questions = loader.questions(store, backend.questions())
        if not receipts and not records and questions is None:
            return None
        return Changes(tuple(receipts), now, records, open_records, questions, side_now)

    def _changes(self, changes: Changes | None) -> None:
        if changes is None:
            return
        model = self.model
        changed = False
        for receipt in changes.receipts:
            changed = model.apply(receipt) or changed
        if changes.records:
            model.records.clear()
            model.marks = Marks(model.marks.status_at, changes.marks.work)
            if changes.open_records is not None:
                model.open_records = changes.open_records
            changed = True
        if changes.questions is not None:
            model.questions = changes.questions
            self._side = changes.side
            changed = True
        if changed:
            self.request_publish()
