"""The inbox: every pending input request across servers and every agent question, oldest first.

Input requests come from the library store (receipts in ``input_required``); agents'
``work_ask`` questions come from the sidecar store. Both are answered with the same
generated form (:mod:`chit.tui.screens.answer`).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from chit.receipts import Receipt
from chit.tui.context import Place
from chit.tui.safe import plain_line
from chit.tui.screens.base import ChitScreen
from chit.tui.view import Prompt, Question, Snapshot, ago
from chit.tui.widgets.banner import Banner
from chit.tui.widgets.footer import ChitFooter


class InboxScreen(ChitScreen[None]):
    """Prompts and agents' questions waiting for a person; Enter answers the highlighted one."""

    PLACE = Place.INBOX
    AUTO_FOCUS = "#prompts"
    BINDING_GROUP_TITLE = "Inbox"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
    ]
    DEFAULT_CSS = """
    InboxScreen DataTable { height: 1fr; }
    InboxScreen #inbox-empty { padding: 1 2; color: $foreground; }
    """

    def __init__(self) -> None:
        super().__init__()
        # Set before mounting: the footer asks for the selection (``check_action``) as soon
        # as the screen is pushed, and a key may arrive before ``on_mount`` has run — a
        # demo once died of ``'InboxScreen' object has no attribute 'items'`` there.
        self.items: tuple[Item, ...] = ()
        self._keys: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("Inbox: input required and agent questions", classes="screen-title")
        yield Banner(self.chit.backend.mode)
        yield DataTable[Text](id="prompts", cursor_type="row")
        yield Static("Nothing is waiting for you.", id="inbox-empty")
        yield ChitFooter()

    def on_mount(self) -> None:
        table = self.query_one("#prompts", DataTable)
        table.add_column("Waiting", width=10, key="age")
        table.add_column("From", width=22, key="tool")
        table.add_column("Kind", width=14, key="kind")
        table.add_column("Prompt", key="prompt")
        self.watch(self.chit, "snapshot", self._show)

    def _show(self, snapshot: Snapshot) -> None:
        table = self.query_one("#prompts", DataTable)
        current = self._item()
        items = _items(snapshot)
        keys = [_key(item) for item in items]
        rows = [_cells(snapshot, item) for item in items]
        self.items = items
        if keys == self._keys:
            for key, cells in zip(keys, rows, strict=True):
                table.update_cell(key, "age", cells[0])
        else:
            table.clear()
            for key, cells in zip(keys, rows, strict=True):
                table.add_row(*cells, key=key)
            self._keys = keys
            if current is not None and (wanted := _key(current)) in keys:
                table.move_cursor(row=keys.index(wanted), animate=False)
        table.display = bool(keys)
        self.query_one("#inbox-empty").display = not keys
        self.chit.refresh_bindings()

    def _item(self) -> Item | None:
        table = self.query_one_optional("#prompts", DataTable)
        if table is None:  # not composed yet
            return None
        row = table.cursor_row
        return self.items[row] if 0 <= row < len(self.items) else None

    def selected_receipt(self) -> Receipt | None:
        """The receipt of the highlighted prompt (None on an agent question)."""
        item = self._item()
        return item.receipt if isinstance(item, Prompt) else None

    def has_prompt(self) -> bool:
        """Every inbox row is something to answer."""
        return self._item() is not None

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.chit.refresh_bindings()

    def action_answer_selected(self) -> None:
        """Answer the highlighted prompt or question (``r`` and ``Enter``)."""
        item = self._item()
        if isinstance(item, Prompt):
            self.chit.action_answer(item.request.key)
        elif isinstance(item, Question):
            self.chit.answer_question(item)

    @on(DataTable.RowSelected)
    def _answer(self) -> None:
        self.action_answer_selected()


Item = Prompt | Question
"""One inbox row."""


def _cells(snapshot: Snapshot, item: Item) -> tuple[Text, ...]:
    if isinstance(item, Prompt):
        req = item.request
        return (
            Text(ago(snapshot.now, req.received_at)),
            plain_line(f"{item.receipt.server}/{item.receipt.tool}"),
            Text(req.kind.value),
            plain_line(req.message or req.key),
        )
    return (
        Text(ago(snapshot.now, item.asked_at)),
        plain_line(f"work: {item.work_label}"),
        Text("agent question", style="bold"),
        plain_line(item.question),
    )


def _key(item: Item) -> str:
    if isinstance(item, Prompt):
        return f"p:{item.receipt.receipt_id}/{item.request.key}"
    return f"q:{item.decision_id}"


def _items(snapshot: Snapshot) -> tuple[Item, ...]:
    """Prompts and questions merged, oldest first (each list already is)."""
    items: list[Item] = [*snapshot.prompts, *snapshot.questions]
    items.sort(key=lambda i: i.request.received_at if isinstance(i, Prompt) else i.asked_at)
    return tuple(items)
