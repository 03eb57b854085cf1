"""The inbox: every pending input request across servers and every agent question, oldest first.

Input requests come from the library store (receipts in ``input_required``); agents'
``work_ask`` questions come from the sidecar store. Both are answered with the same
generated form (:mod:`chit.tui.screens.answer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from chit.receipts import Receipt
from chit.tui.view import Prompt, Question, Snapshot, ago
from chit.tui.widgets.banner import Banner

if TYPE_CHECKING:
    from chit.tui.app import ChitApp


class InboxScreen(Screen[None]):
    """Prompts and agents' questions waiting for a person; Enter answers the highlighted one."""

    BINDING_GROUP_TITLE = "Inbox"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
    ]
    DEFAULT_CSS = """
    InboxScreen DataTable { height: 1fr; }
    InboxScreen #inbox-empty { padding: 1 2; color: $text-muted; }
    """

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("Inbox: input required and agent questions", classes="screen-title")
        yield Banner(self.chit.backend.mode)
        yield DataTable[str | Text](id="prompts", cursor_type="row")
        yield Static("Nothing is waiting for you.", id="inbox-empty")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#prompts", DataTable)
        table.add_column("Waiting", width=10, key="age")
        table.add_column("From", width=22, key="tool")
        table.add_column("Kind", width=14, key="kind")
        table.add_column("Prompt", key="prompt")
        self.items: tuple[Item, ...] = ()
        self.watch(self.chit, "snapshot", self._show)

    def _show(self, snapshot: Snapshot) -> None:
        table = self.query_one("#prompts", DataTable)
        current = self._item()
        self.items = _items(snapshot)
        keys = [_key(item) for item in self.items]
        table.clear()
        for key, item in zip(keys, self.items, strict=True):
            if isinstance(item, Prompt):
                req = item.request
                table.add_row(
                    ago(snapshot.now, req.received_at),
                    f"{item.receipt.server}/{item.receipt.tool}",
                    req.kind.value,
                    Text(req.message or req.key),
                    key=key,
                )
            else:
                table.add_row(
                    ago(snapshot.now, item.asked_at),
                    Text(f"work: {item.work_label}"),
                    Text("agent question", style="bold"),
                    Text(item.question),
                    key=key,
                )
        if current is not None and (wanted := _key(current)) in keys:
            table.move_cursor(row=keys.index(wanted), animate=False)
        table.display = bool(keys)
        self.query_one("#inbox-empty").display = not keys

    def _item(self) -> Item | None:
        row = self.query_one("#prompts", DataTable).cursor_row
        return self.items[row] if 0 <= row < len(self.items) else None

    def selected_receipt(self) -> Receipt | None:
        """The receipt of the highlighted prompt (None on an agent question)."""
        item = self._item()
        return item.receipt if isinstance(item, Prompt) else None

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


def _key(item: Item) -> str:
    if isinstance(item, Prompt):
        return f"p:{item.receipt.receipt_id}/{item.request.key}"
    return f"q:{item.decision_id}"


def _items(snapshot: Snapshot) -> tuple[Item, ...]:
    """Prompts and questions merged, oldest first (each list already is)."""
    items: list[Item] = [*snapshot.prompts, *snapshot.questions]
    items.sort(key=lambda i: i.request.received_at if isinstance(i, Prompt) else i.asked_at)
    return tuple(items)
