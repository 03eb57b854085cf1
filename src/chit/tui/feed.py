"""The app's data feed: engine events, publishing, the filter and the pages.

A mixin of :class:`~chit.tui.app.ChitApp` (so ``app.py`` stays wiring), made of three
parts: the full reads (:mod:`chit.tui.loading`: the first page, the index behind it),
the clock tick and the store check (:mod:`chit.tui.ticking`), and here what arrives
between them: a changed receipt comes as an engine event (queued on the engine's
thread, drained here on the UI thread). Every change ends in
:meth:`Feed.request_publish`, which builds one snapshot from the model (reading only the
receipts it lacks) and sets the ``snapshot`` var.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from chit import clock
from chit.receipts import Receipt
from chit.tui import loader
from chit.tui.loader import RecordInfo
from chit.tui.loading import Loading
from chit.tui.messages import EventsArrived, PublishRequested
from chit.tui.model import LiveModel, Need
from chit.tui.ticking import Ticking
from chit.tui.view import PAGE_SIZE, Query, parse_filter

if TYPE_CHECKING:
    from textual.timer import Timer

    from chit.tui.app import ChitApp


DEBOUNCE_S = 0.08
"""Keys typed into the filter closer together than this are applied as one."""


class Feed(Loading, Ticking):
    """Data loading and publishing for :class:`~chit.tui.app.ChitApp`."""

    model: LiveModel
    query_text: str
    pages: int
    paused: bool
    _events: deque[Any]
    _posted: threading.Event
    _side: object
    publish_pending: bool

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
        self._typing: Timer | None = None
        self._typed_at = 0.0
        self.init_ticking()

    @property
    def filter_query(self) -> Query:
        """The parsed ``/`` filter."""
        return parse_filter(self.query_text)

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
        """Nothing left to read or show, the index read too (tests and benchmarks wait
        for this)."""
        app = self._app()
        busy = any(not w.is_finished for w in app.workers if w.group != "check")
        idle = not self.publish_pending and self._typing is None and not self._events
        return self.model.complete and idle and not busy

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
