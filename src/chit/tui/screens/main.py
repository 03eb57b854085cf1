"""The main screen: receipts in attention order, the filter, the detail pane."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import DataTable, Input, Static

from chit import clock
from chit.receipts import Receipt
from chit.tui.context import Place
from chit.tui.screens.base import ChitScreen
from chit.tui.view import Detail, RecordDetail, Snapshot, load_detail, load_record
from chit.tui.widgets.banner import Banner, StatusLine
from chit.tui.widgets.detail import DetailView
from chit.tui.widgets.footer import ChitFooter
from chit.tui.widgets.receipt_table import ReceiptTable

EMPTY_TEXT = (
    "No receipts yet.\n\n"
    "A receipt appears when a server accepts a tool call as a task.\n"
    "Press n to start a call, s to see your servers, or run `chit demo` to watch one live."
)


class MainScreen(ChitScreen[None]):
    """Receipts table (+ detail pane when the terminal is wide)."""

    PLACE = Place.MAIN
    CSS_PATH = "main.tcss"
    AUTO_FOCUS = "#receipts"
    BINDING_GROUP_TITLE = "Receipts"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 (Textual declares it)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_detail", "Detail", id="chit.detail", show=False),
        Binding("slash", "filter", "Filter", id="chit.filter", tooltip="state: server: work: text"),
        Binding("escape", "clear_filter", "Clear filter", id="chit.clear_filter"),
        Binding("z", "pause", "Pause", id="chit.pause", tooltip="Freeze the list (z resumes)"),
        Binding("z", "resume", "Resume", id="chit.resume", tooltip="Show what changed"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._detail: Detail | RecordDetail | None = None
        self._detail_key: tuple[str, int] | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="title")
        yield Banner(self.chit.backend.mode)
        yield Input(placeholder="/ filter: state:working server:demo text", id="filter")
        with Horizontal(id="body"):
            yield ReceiptTable(id="receipts")
            yield Static(EMPTY_TEXT, id="empty")
            yield DetailView(id="side")
        yield StatusLine(id="status")
        yield ChitFooter()

    def _title(self) -> Text:
        return Text.assemble(("chit ", "bold"), (self.chit.home_label, "italic"))

    def on_mount(self) -> None:
        field = self.query_one("#filter", Input)
        self._hide_filter(field)
        self.watch(self.chit, "snapshot", self._show, init=False)
        if self.chit.model.ready:
            self._show(self.chit.snapshot)

    def _hide_filter(self, field: Input) -> None:
        # Hidden and disabled: a hidden input must never take the focus (or the keys).
        field.display = False
        field.disabled = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Pause or resume (whichever applies); clear only an active filter."""
        if action == "pause":
            return not self.chit.paused
        if action == "resume":
            return self.chit.paused
        if action == "clear_filter":
            return bool(self.chit.query_text) or self.query_one("#filter").display
        return True

    def _show(self, snapshot: Snapshot) -> None:
        table = self.query_one(ReceiptTable)
        empty = snapshot.total == 0 and not snapshot.groups
        self.query_one("#empty").display = empty
        table.display = not empty
        table.show(snapshot)
        self.query_one(StatusLine).show(snapshot, self.chit.backend.mode, self.chit.query_text)
        if self.focused is None and not empty:
            table.focus()
        self._want()
        self._load_detail()

    # ---------------------------------------------------------------- selection
    def selected_receipt(self) -> Receipt | None:
        """The receipt under the cursor (None on a work-record row)."""
        table = self.query_one_optional(ReceiptTable)  # None until composed
        key = table.cursor_key if table is not None else None
        if key is None or not key.startswith("r:"):
            return None
        return self.chit.model.receipts.get(key[2:])

    def _want(self) -> None:
        """The table's rows come from the index: read the highlighted receipt whole."""
        key = self.query_one(ReceiptTable).cursor_key
        if key is not None and key.startswith("r:"):
            self.chit.want(key[2:])

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._want()
        self.chit.refresh_bindings()
        self._load_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open_detail()

    @on(ReceiptTable.EndReached)
    def _more(self) -> None:
        self.chit.more()

    def _load_detail(self) -> None:
        """Read the pane's receipt when it changed; otherwise only redraw its times."""
        side = self.query_one(DetailView)
        if not self.has_class("-wide"):
            return
        table = self.query_one_optional(ReceiptTable)  # None until composed
        key = table.cursor_key if table is not None else None
        if key is None:
            return
        kind, ident = key[0], key[2:]
        entry = self.chit.model.entry(ident) if kind == "r" else None
        version = entry.version if entry is not None else 0
        now = clock.now()
        if self._detail_key == (key, version) and kind == "r":
            side.show(self._detail, now)
            return
        self._detail_key = (key, version)
        backend = self.chit.backend

        def read() -> Detail | RecordDetail | None:
            store = backend.reader()
            if kind == "r":
                return load_detail(store, ident, now)
            return load_record(store, ident) if ident else None

        def show(detail: Detail | RecordDetail | None) -> None:
            self._detail = detail
            side.show(detail, clock.now())

        self.submit(read, description="Reading detail", done=show, group="detail", exclusive=True)

    # ---------------------------------------------------------------- actions
    def action_open_detail(self) -> None:
        """Open the receipt on its own screen."""
        self.chit.action_open_detail()

    def action_pause(self) -> None:
        """Freeze the list while you read it (htop's Z)."""
        self.chit.set_paused(True)
        self.query_one(StatusLine).show(
            self.chit.snapshot, self.chit.backend.mode, self.chit.query_text, paused=True
        )
        self.refresh_bindings()

    def action_resume(self) -> None:
        """Show what changed meanwhile."""
        self.chit.set_paused(False)
        self.refresh_bindings()

    def action_filter(self) -> None:
        """Show and focus the filter input."""
        field = self.query_one("#filter", Input)
        field.disabled = False
        field.display = True
        field.value = self.chit.query_text
        field.focus()
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        """Clear the filter and go back to the table."""
        field = self.query_one("#filter", Input)
        field.value = ""
        self._hide_filter(field)
        self.chit.set_filter("")
        self.query_one(ReceiptTable).focus()
        self.refresh_bindings()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.chit.type_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if event.value != self.chit.query_text:  # typed within the debounce
            self.chit.set_filter(event.value)
        errors = self.chit.filter_query.errors
        if errors:
            self.notify("; ".join(errors), severity="warning", timeout=3)
        if not event.value:
            self._hide_filter(event.input)
        self.query_one(ReceiptTable).focus()
        self.refresh_bindings()
