"""The main screen: filter, receipts grouped by work record, the detail pane."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from chit import clock
from chit.receipts import Receipt
from chit.tui.view import Snapshot, load_detail, load_record
from chit.tui.widgets.banner import Banner, StatusLine
from chit.tui.widgets.detail import DetailView
from chit.tui.widgets.receipt_table import ReceiptTable

if TYPE_CHECKING:
    from chit.tui.app import ChitApp

EMPTY_TEXT = (
    "No receipts yet.\n\n"
    "A receipt appears when a server accepts a tool call as a task.\n"
    "Press n to start a call, s to see your servers, or run `chit demo` to watch one live."
)


class MainScreen(Screen[None]):
    """Receipts table (+ detail pane when the terminal is wide)."""

    CSS_PATH = "main.tcss"
    BINDING_GROUP_TITLE = "Receipts"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 (Textual declares it)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", id="chit.filter", tooltip="state: server: work: text"),
        Binding("escape", "clear_filter", "Clear", id="chit.clear_filter", show=False),
        Binding("enter", "open_detail", "Detail", id="chit.detail", show=False),
    ]

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="title")
        yield Banner(self.chit.backend.mode)
        yield Input(placeholder="/ filter: state:working server:demo text", id="filter")
        with Horizontal(id="body"):
            yield ReceiptTable(id="receipts")
            yield Static(EMPTY_TEXT, id="empty")
            yield DetailView(id="side")
        yield StatusLine(id="status")
        yield Footer()

    def _title(self) -> Text:
        return Text.assemble(("chit ", "bold"), (self.chit.home_label, "dim"))

    def on_mount(self) -> None:
        self.watch(self.chit, "snapshot", self._show, init=False)
        self.query_one("#filter").display = False
        self.query_one(ReceiptTable).focus()

    def _show(self, snapshot: Snapshot) -> None:
        table = self.query_one(ReceiptTable)
        empty = snapshot.total == 0
        table.display = not empty
        self.query_one("#empty").display = empty
        table.show(snapshot)
        self.query_one(StatusLine).show(snapshot, self.chit.backend.mode, self.chit.query_text)
        self._load_detail()

    # ---------------------------------------------------------------- selection
    def selected_receipt(self) -> Receipt | None:
        """The receipt under the cursor (None on a work-record row)."""
        key = self.query_one(ReceiptTable).cursor_key
        if key is None or not key.startswith("r:"):
            return None
        receipt_id = key[2:]
        return next((r for r in self.chit.snapshot.receipts if r.receipt_id == receipt_id), None)

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._load_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open_detail()

    @on(ReceiptTable.EndReached)
    def _more(self) -> None:
        self.chit.more()

    def _load_detail(self) -> None:
        side = self.query_one(DetailView)
        if not self.has_class("-wide"):
            return
        key = self.query_one(ReceiptTable).cursor_key
        if key is None:
            return
        kind, ident = key[0], key[2:]
        backend = self.chit.backend
        now = clock.now()

        def read() -> object:
            with backend.store() as store:
                if kind == "r":
                    return load_detail(store, ident, now)
                return load_record(store, ident) if ident else None

        def show(detail: object) -> None:
            side.show(detail, now)  # type: ignore[arg-type]

        self.chit.submit(
            read, description="Reading detail", done=show, group="detail", exclusive=True
        )

    # ---------------------------------------------------------------- actions
    def action_open_detail(self) -> None:
        """Open the receipt on its own screen."""
        self.chit.action_open_detail()

    def action_filter(self) -> None:
        """Show and focus the filter input."""
        field = self.query_one("#filter", Input)
        field.display = True
        field.value = self.chit.query_text
        field.focus()

    def action_clear_filter(self) -> None:
        """Clear the filter and go back to the table."""
        field = self.query_one("#filter", Input)
        field.value = ""
        field.display = False
        self.chit.set_filter("")
        self.query_one(ReceiptTable).focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.chit.set_filter(event.value)
        errors = self.chit.filter_query.errors
        if errors:
            self.notify("; ".join(errors), severity="warning", timeout=2)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.display = False
        self.query_one(ReceiptTable).focus()
