"""The feed's reads of the whole store: the first page, the index, the index's fill.

A mixin of :class:`~chit.tui.feed.Feed`. With :data:`~chit.tui.head.HEAD_FROM`
receipts or more, the first load reads only the first page (:func:`chit.tui.head.read_head`)
and paints it; the whole index is read in a worker after that paint (and filled with the
table's fields after that), so the first paint does not wait for 100,000 entries. A
smaller store reads its index at once, as does every later full read (Ctrl+R, a resync).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chit import clock
from chit.receipts import Receipt
from chit.tui import head as head_module
from chit.tui import loader
from chit.tui.head import Head
from chit.tui.index import Extras, ReceiptIndex
from chit.tui.loader import Marks, RecordInfo
from chit.tui.model import LiveModel
from chit.tui.view import INBOX_LIMIT, NO_WORK, PAGE_SIZE, Query, Question

if TYPE_CHECKING:
    from chit.tui.app import ChitApp

FREEZE_AT = 10_000
"""From this many receipts the index is hidden from the garbage collector (see ``_fill``)."""


@dataclass(frozen=True)
class FirstLoad:
    """What the first (or a full) load read: the index, or only the first page."""

    index: ReceiptIndex | None
    head: Head | None
    marks: Marks
    receipts: dict[str, Receipt]
    open_records: tuple[Any, ...]
    questions: tuple[Question, ...]
    side: object
    records: dict[str, RecordInfo] = field(default_factory=dict)


class Loading:
    """The full reads of :class:`~chit.tui.feed.Feed`."""

    model: LiveModel
    pages: int
    _side: object

    def _app(self) -> ChitApp:
        return self  # type: ignore[return-value]

    if TYPE_CHECKING:

        @property
        def filter_query(self) -> Query:
            """The feed's."""

        def request_publish(self) -> None:
            """The feed's (:meth:`chit.tui.feed.Feed.request_publish`)."""

    def refresh_data(self) -> None:
        """Read everything again (Ctrl+R, after a reconnect); the view updates in place.

        The first load of a large store reads the first page only, and the index after
        the first paint; once an index is shown, a new one is read before it is replaced.
        """
        app = self._app()
        query, limit = self.filter_query, self.pages * PAGE_SIZE
        app.submit(
            self._read_all,
            query,
            limit,
            not self.model.complete,
            description="Reading receipts",
            done=self._adopt,
            group="load",
            exclusive=True,
        )

    def _read_all(self, query: Query, limit: int, first: bool) -> FirstLoad:
        backend = self._app().backend
        side = backend.questions_marker()
        decisions = backend.questions()
        store = backend.reader()
        open_records = loader.read_open_records(store)
        questions = loader.questions(store, decisions)
        marks = loader.read_marks(store)
        if first and store.receipts.count() >= head_module.HEAD_FROM:
            head, receipts = head_module.read_head(
                store,
                limit,
                clock.now(),
                INBOX_LIMIT,
                [r.id for r in open_records],
            )
            keys = {e.work_ref for e in head.page} - {NO_WORK}
            records = loader.read_records(store, keys)  # the page's, shown with it
            return FirstLoad(None, head, marks, receipts, open_records, questions, side, records)
        index, newest = loader.read_index(store)
        window, _ = index.window(query, limit)
        ids = [e.receipt_id for e in window] + index.first_inputs(INBOX_LIMIT)
        return FirstLoad(
            index=index,
            head=None,
            marks=Marks(newest, marks.work),
            receipts=loader.read_receipts(store, ids),
            open_records=open_records,
            questions=questions,
            side=side,
        )

    def _adopt(self, load: FirstLoad) -> None:
        model = LiveModel(open_records=load.open_records, questions=load.questions)
        model._early = self.model._early if not self.model.complete else []
        model.receipts.update(load.receipts)
        model.records.update(load.records)
        if load.index is not None:
            model.adopt(load.index, load.marks)
        else:
            model.head, model.marks = load.head, load.marks
        self.model = model
        self._side = load.side
        self.request_publish()
        if load.index is not None:
            self._fill(load.index)
        else:
            # After the first page is on screen: the read competes for the interpreter.
            self._app().call_after_refresh(self._read_rest, model)

    def _read_rest(self, model: LiveModel) -> None:
        """Read the whole index behind the first page (a worker; keys stay live)."""
        if self.model is not model:
            return  # read everything again meanwhile
        backend = self._app().backend

        def adopt(found: tuple[ReceiptIndex, str | None]) -> None:
            if self.model is not model:
                return
            index, newest = found
            # Changes since the first page (kept by the model) are applied on top.
            model.adopt(index, Marks(newest, model.marks.work))
            self.request_publish()
            self._fill(index)

        self._app().submit(
            lambda: loader.read_index(backend.reader()),
            description="Reading receipts",
            done=adopt,
            group="rest",
            exclusive=True,
        )

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
        if receipt_id in self.model.receipts or self.model.entry(receipt_id) is None:
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
