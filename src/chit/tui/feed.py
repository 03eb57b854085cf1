"""The app's data feed: first load, engine events, the cheap store check, publishing.

A mixin of :class:`~chit.tui.app.ChitApp` (so ``app.py`` stays wiring). The live model
is loaded once; afterwards a changed receipt arrives as an engine event (queued on the
engine's thread, drained here on the UI thread). The tick moves the clock and checks the
store only for what no event tells: work records and agents' questions (and, with no
engine, receipts other processes wrote), with two index look-ups and two ``stat`` calls.
Nothing is re-read when nothing changed.
Every change ends in :meth:`Feed.request_publish`, which builds one snapshot from the
model (reading only the receipts it lacks) and sets the ``snapshot`` reactive.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from chit import clock
from chit.receipts import Receipt
from chit.tui import loader
from chit.tui.index import Extras, ReceiptIndex
from chit.tui.loader import Marks, RecordInfo
from chit.tui.messages import EventsArrived, PublishRequested
from chit.tui.model import LiveModel, Need
from chit.tui.view import INBOX_LIMIT, PAGE_SIZE, Query, Question, clock_marks, parse_filter

if TYPE_CHECKING:
    from textual.timer import Timer

    from chit.tui.app import ChitApp


FAULT_ENV = "CHIT_TUI_FAULT"
"""Test-only: ``tick`` makes the first clock tick after the first load raise, unhandled,
so a test can see what a real crash does (the exit code, the log, the demo's home)."""

FREEZE_AT = 10_000
"""From this many receipts the index is hidden from the garbage collector (see ``_fill``)."""

DEBOUNCE_S = 0.08
"""Keys typed into the filter closer together than this are applied as one."""

COARSE_S = 15.0
"""Seconds a text that moves by the minute may lag behind the clock."""

RECORDS_EVERY = 5
"""With the engine's events, the store is looked at for work records every this many ticks."""


@dataclass(frozen=True)
class FirstLoad:
    """What the first (or a full) load read."""

    index: ReceiptIndex
    marks: Marks
    receipts: dict[str, Receipt]
    open_records: tuple[Any, ...]
    questions: tuple[Question, ...]
    side: object


@dataclass(frozen=True)
class Changes:
    """What the store check found since the model's marks."""

    receipts: tuple[Receipt, ...]
    marks: Marks
    records: bool
    open_records: tuple[Any, ...] | None
    questions: tuple[Question, ...] | None
    side: object


class Feed:
    """Data loading and publishing for :class:`~chit.tui.app.ChitApp`."""

    model: LiveModel
    query_text: str
    pages: int
    paused: bool
    _events: deque[Any]
    _posted: threading.Event
    _side: object
    publish_pending: bool
    _ticks: int

    def _app(self) -> ChitApp:
        return self  # type: ignore[return-value]

    def init_feed(self) -> None:
        """Empty model, no filter, first page, not paused."""
        self.model = LiveModel()
        self.query_text = ""
        self.pages = 1
        self.paused = False
        self._events = deque()
        self._posted = threading.Event()
        self._side = None
        self.publish_pending = False
        self._ticks = 0
        self._typing: Timer | None = None
        self._typed_at = 0.0
        self._fault = os.environ.get(FAULT_ENV, "")

    @property
    def filter_query(self) -> Query:
        """The parsed ``/`` filter."""
        return parse_filter(self.query_text)

    # ------------------------------------------------------------------ loading
    def refresh_data(self) -> None:
        """Read everything again (Ctrl+R, after a reconnect); the view updates in place."""
        app = self._app()
        query, limit = self.filter_query, self.pages * PAGE_SIZE
        app.submit(
            self._read_all,
            query,
            limit,
            description="Reading receipts",
            done=self._adopt,
            group="load",
            exclusive=True,
        )

    def _read_all(self, query: Query, limit: int) -> FirstLoad:
        backend = self._app().backend
        side = backend.questions_marker()
        decisions = backend.questions()
        store = backend.reader()
        index, newest = loader.read_index(store)
        window, _ = index.window(query, limit)
        ids = [e.receipt_id for e in window] + index.first_inputs(INBOX_LIMIT)
        return FirstLoad(
            index=index,
            marks=Marks(newest, loader.read_marks(store).work),
            receipts=loader.read_receipts(store, ids),
            open_records=loader.read_open_records(store),
            questions=loader.questions(store, decisions),
            side=side,
        )

    def _adopt(self, load: FirstLoad) -> None:
        model = LiveModel(open_records=load.open_records, questions=load.questions)
        model._early = self.model._early if not self.model.ready else []
        model.receipts.update(load.receipts)
        model.adopt(load.index, load.marks)
        self.model = model
        self._side = load.side
        self.request_publish()
        self._fill(load.index)

    def _fill(self, index: ReceiptIndex) -> None:
        """Complete the index with the table's fields, after the first paint.

        From then on a filter keystroke is served from the index alone: no receipt read.
        The index's objects are then moved out of the garbage collector's sight
        (``gc.freeze``): they live as long as the app, and a full collection walking
        100,000 entries paused a keystroke's repaint by half a second on a loaded machine.
        """
        backend = self._app().backend

        def read() -> tuple[list[Extras], tuple[int, str]]:
            return loader.read_extras(backend.reader()), index.prejoin_text()

        def filled(found: tuple[list[Extras], tuple[int, str]]) -> None:
            if self.model.index is not index:
                return  # read everything again meanwhile: that index fills itself
            extras, joined = found
            index.fill(extras)
            index.adopt_text(*joined)
            if len(index) >= FREEZE_AT:
                gc.freeze()  # undone when the app ends (ChitApp.on_unmount)
            self.request_publish()

        self._app().submit(
            read,
            description="Reading receipts",
            done=filled,
            group="fill",
            exclusive=True,
        )

    def want(self, receipt_id: str) -> None:
        """Read the full receipt of the highlighted row (its actions and keys need it).

        Rows come from the index; only the one the person is on is read whole.
        """
        if receipt_id in self.model.receipts or receipt_id not in (self.model.index or ()):
            return
        backend = self._app().backend

        def got(found: dict[str, Receipt]) -> None:
            self.model.merge(found, {})
            if found:
                self._app().refresh_context()

        self._app().submit(
            lambda: loader.read_receipts(backend.reader(), [receipt_id]),
            description="Reading receipts",
            done=got,
            group="want",
            exclusive=True,
        )

    # ------------------------------------------------------------------ events
    def forward_event(self, event: Any) -> None:
        """Queue an engine event (called on the engine's thread: touch no widget)."""
        self._events.append(event)
        if not self._posted.is_set():
            self._posted.set()
            self._app().post_message(EventsArrived())

    def on_events_arrived(self, _: EventsArrived) -> None:
        # Imported here: the engine that sent the event has loaded it already, and the
        # first paint must not wait for the runtime (and mcp) to import.
        from chit.engine.models import ReceiptUpdate, Resync
        from chit.runtime.events import ReceiptChanged
        from chit.tui.engine_host import Disconnected

        self._posted.clear()
        changed = reread = False
        while self._events:
            event = self._events.popleft()
            if isinstance(event, ReceiptChanged | ReceiptUpdate):
                changed = self.model.apply(event.receipt) or changed
            elif isinstance(event, Resync):
                reread = True
            elif isinstance(event, Disconnected):
                self._app().notify(event.reason, title="chit's daemon", severity="warning")
        if reread:  # events were lost (or the daemon is back): read everything again
            self.refresh_data()
        elif changed:
            self.request_publish()

    def apply_receipt(self, receipt: object) -> None:
        """Show a receipt an action returned (its event may come later, or never)."""
        if isinstance(receipt, Receipt) and self.model.apply(receipt):
            self.request_publish()

    # ------------------------------------------------------------------ the tick
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
        assert self.model.index is not None
        now = clock.now()
        moved = self.model.index.advance(now)
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

    # ------------------------------------------------------------------ publishing
    def request_publish(self) -> None:
        """Build and publish a snapshot soon; requests in one burst become one."""
        self.publish_pending = True
        self._app().post_message(PublishRequested())

    def on_publish_requested(self, _: PublishRequested) -> None:
        if not self.publish_pending:
            # An earlier message of the same burst built it already (keystrokes typed
            # while a snapshot was being built are served by one build, not one each).
            return
        if not self.model.ready:
            self.publish_pending = False
            return
        snapshot, need = self.model.build(self.filter_query, self.pages * PAGE_SIZE, clock.now())
        if need:
            self._fetch(need)
            return
        self.publish_pending = False
        if not self.paused:
            self._app().publish(snapshot)

    @property
    def settled(self) -> bool:
        """Nothing left to read or show (tests and benchmarks wait for this)."""
        app = self._app()
        busy = any(not w.is_finished for w in app.workers if w.group != "check")
        idle = not self.publish_pending and self._typing is None and not self._events
        return self.model.ready and idle and not busy

    def _fetch(self, need: Need) -> None:
        backend = self._app().backend

        def read() -> tuple[dict[str, Receipt], dict[str, RecordInfo]]:
            store = backend.reader()
            return (
                loader.read_receipts(store, need.receipts),
                loader.read_records(store, need.records),
            )

        def merge(found: tuple[dict[str, Receipt], dict[str, RecordInfo]]) -> None:
            receipts, records = found
            for receipt_id in need.receipts - receipts.keys():
                self.model.forget(receipt_id)  # deleted meanwhile
            self.model.merge(receipts, records)
            self.request_publish()

        self._app().submit(
            read, description="Reading receipts", done=merge, group="fetch", exclusive=True
        )

    # ------------------------------------------------------------------ the view
    def set_filter(self, text: str) -> None:
        """Apply a ``/`` filter from the first page (served from the index)."""
        if self._typing is not None:
            self._typing.stop()
            self._typing = None
        self._typed_at = time.monotonic()
        self.query_text = text
        self.pages = 1
        self.request_publish()

    def type_filter(self, text: str) -> None:
        """A keystroke in the filter box: debounced with a timer.

        The first keystroke after a pause is applied at once (a single key repaints
        without waiting); keys typed within :data:`DEBOUNCE_S` of the last applied one
        wait until the typing pauses that long, and then only the last text is applied.
        """
        app = self._app()
        if self._typing is not None:
            self._typing.stop()
            self._typing = None
        if time.monotonic() - self._typed_at >= DEBOUNCE_S:
            self.set_filter(text)
            return
        self._typing = app.set_timer(DEBOUNCE_S, lambda: self.set_filter(text))

    def more(self) -> None:
        """Show one more page of receipts."""
        if self._app().snapshot.more:
            self.pages += 1
            self.request_publish()

    def set_paused(self, paused: bool) -> None:
        """Freeze (or resume) what the screens show; the model keeps up meanwhile."""
        self.paused = paused
        if not paused:
            self.request_publish()
