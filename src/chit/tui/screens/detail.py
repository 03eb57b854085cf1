"""One receipt on a full screen: every element and the whole timeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from chit import clock
from chit.receipts import Receipt
from chit.tui.view import Detail, Snapshot, load_detail
from chit.tui.widgets.banner import Banner
from chit.tui.widgets.detail import DetailView

if TYPE_CHECKING:
    from chit.tui.app import ChitApp


class DetailScreen(Screen[None]):
    """The receipt ``receipt_id``; reloads whenever the app's snapshot changes."""

    BINDING_GROUP_TITLE = "Receipt"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
    ]

    def __init__(self, receipt_id: str) -> None:
        super().__init__()
        self.receipt_id = receipt_id
        self.detail: Detail | None = None

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(f"Receipt {self.receipt_id}", classes="screen-title")
        yield Banner(self.chit.backend.mode)
        yield DetailView()
        yield Footer()

    def on_mount(self) -> None:
        self.watch(self.chit, "snapshot", self._reload, init=False)
        self._reload(None)

    def selected_receipt(self) -> Receipt | None:
        """The receipt this screen shows."""
        return self.detail.receipt if self.detail else None

    def _reload(self, _: Snapshot | None) -> None:
        backend, receipt_id, now = self.chit.backend, self.receipt_id, clock.now()

        def read() -> Detail | None:
            with backend.store() as store:
                return load_detail(store, receipt_id, now)

        def show(detail: Detail | None) -> None:
            self.detail = detail
            self.query_one(DetailView).show(detail, now)

        self.chit.submit(
            read, description="Reading receipt", done=show, group="detail-screen", exclusive=True
        )
