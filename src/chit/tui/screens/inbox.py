"""The inbox: every pending input request across servers, oldest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from chit.receipts import Receipt
from chit.tui.view import Prompt, Snapshot, ago
from chit.tui.widgets.banner import Banner

if TYPE_CHECKING:
    from chit.tui.app import ChitApp


class InboxScreen(Screen[None]):
    """Prompts waiting for a person; Enter answers the highlighted one."""

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
        yield Static("Inbox: input required", classes="screen-title")
        yield Banner(self.chit.backend.mode)
        yield DataTable[str | Text](id="prompts", cursor_type="row")
        yield Static("Nothing is waiting for you.", id="inbox-empty")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#prompts", DataTable)
        table.add_column("Waiting", width=10, key="age")
        table.add_column("Server/tool", width=22, key="tool")
        table.add_column("Kind", width=11, key="kind")
        table.add_column("Prompt", key="prompt")
        self.prompts: tuple[Prompt, ...] = ()
        self.watch(self.chit, "snapshot", self._show)

    def _show(self, snapshot: Snapshot) -> None:
        table = self.query_one("#prompts", DataTable)
        keys = [f"{p.receipt.receipt_id}/{p.request.key}" for p in snapshot.prompts]
        current = (
            keys[table.cursor_row] if self.prompts and 0 <= table.cursor_row < len(keys) else None
        )
        self.prompts = snapshot.prompts
        table.clear()
        for key, prompt in zip(keys, snapshot.prompts, strict=True):
            req = prompt.request
            table.add_row(
                ago(snapshot.now, req.received_at),
                f"{prompt.receipt.server}/{prompt.receipt.tool}",
                req.kind.value,
                Text(req.message or req.key),
                key=key,
            )
        if current in keys:
            table.move_cursor(row=keys.index(current), animate=False)
        table.display = bool(keys)
        self.query_one("#inbox-empty").display = not keys

    def _prompt(self) -> Prompt | None:
        row = self.query_one("#prompts", DataTable).cursor_row
        return self.prompts[row] if 0 <= row < len(self.prompts) else None

    def selected_receipt(self) -> Receipt | None:
        """The receipt of the highlighted prompt."""
        prompt = self._prompt()
        return prompt.receipt if prompt else None

    @on(DataTable.RowSelected)
    def _answer(self) -> None:
        prompt = self._prompt()
        if prompt is not None:
            self.chit.action_answer(prompt.request.key)
