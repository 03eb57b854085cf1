"""One receipt on a full screen: every element and the whole timeline."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from chit import clock
from chit.receipts import Receipt
from chit.tui.context import Place
from chit.tui.screens.base import ChitScreen
from chit.tui.view import Detail, Snapshot, load_detail
from chit.tui.widgets.banner import Banner
from chit.tui.widgets.detail import DetailView
from chit.tui.widgets.footer import ChitFooter


class DetailScreen(ChitScreen[None]):
    """The receipt ``receipt_id``; read again whenever that receipt changes."""

    PLACE = Place.DETAIL
    AUTO_FOCUS = "DetailView"
    BINDING_GROUP_TITLE = "Receipt"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
    ]

    def __init__(self, receipt_id: str) -> None:
        super().__init__()
        self.receipt_id = receipt_id
        self.detail: Detail | None = None
        self._version = -1

    def compose(self) -> ComposeResult:
        yield Static(f"Receipt {self.receipt_id}", classes="screen-title")
        yield Banner(self.chit.backend.mode)
        yield DetailView()
        yield ChitFooter()

    def on_mount(self) -> None:
        self.watch(self.chit, "snapshot", self._changed, init=False)
        self._read()

    def selected_receipt(self) -> Receipt | None:
        """The receipt this screen shows (the newest copy the app has)."""
        return self.chit.model.receipts.get(self.receipt_id) or (
            self.detail.receipt if self.detail else None
        )

    def _changed(self, _: Snapshot) -> None:
        receipt = self.chit.model.receipts.get(self.receipt_id)
        if receipt is not None and receipt.version != self._version:
            self._read()
        elif self.detail is not None:
            self.query_one(DetailView).show(self.detail, clock.now())

    def _read(self) -> None:
        backend, receipt_id, now = self.chit.backend, self.receipt_id, clock.now()

        def read() -> Detail | None:
            return load_detail(backend.reader(), receipt_id, now)

        def show(detail: Detail | None) -> None:
            self.detail = detail
            self._version = detail.receipt.version if detail is not None else -1
            self.query_one(DetailView).show(detail, clock.now())
            self.chit.refresh_bindings()

        self.submit(read, description="Reading receipt", done=show, group="read", exclusive=True)
