"""Accept with care: the outcome is shown before the verdict is recorded.

The preview carries what the person is about to accept: the content summary, the
structured result's keys, the error (if it is one) and the acceptance check. An error
result is marked here, and the app asks a second time before accepting it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from chit.receipts import Receipt, is_success
from chit.tui.safe import clean, one_line, plain
from chit.tui.screens.base import ChitModal
from chit.tui.widgets.footer import ChitFooter


def preview(receipt: Receipt) -> RenderableType:
    """What accepting ``receipt`` means: its outcome and its check, as plain text."""
    o = receipt.outcome
    rows = Table.grid(padding=(0, 1))
    rows.add_column(style="bold", no_wrap=True)
    rows.add_column(overflow="fold")
    rows.add_row("task", plain(one_line(f"{receipt.server}/{receipt.tool}  {receipt.receipt_id}")))
    rows.add_row("purpose", plain(one_line(receipt.purpose or "—")))
    rows.add_row("state", Text(receipt.state.value))
    if o is None:
        rows.add_row("outcome", Text("not retrieved: there is nothing to look at yet"))
    elif o.is_rpc_error:
        rows.add_row("error", plain(f"{o.error_code}: {clean(o.error_message or '')}"))
    else:
        rows.add_row("result", Text("tool error (isError)" if o.is_error else "ok"))
        rows.add_row("summary", plain(o.summary or "—"))
        if o.structured_keys is not None:
            keys = ", ".join(one_line(k) for k in o.structured_keys) or "(empty)"
            rows.add_row("structured", plain(keys))
    check = receipt.acceptance.check
    rows.add_row("check", plain(one_line(check)) if check else Text("none recorded"))
    parts: list[RenderableType] = [rows]
    if not is_success(receipt):
        parts.insert(0, Text("This outcome is not a success.\n", style="bold reverse"))
    return RichGroup(*parts)


class AcceptScreen(ChitModal[bool]):
    """The outcome preview with "Accept" / "Back"; dismisses True to go on."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(False)", "Back", id="chit.dialog.back"),
    ]
    DEFAULT_CSS = """
    AcceptScreen > .dialog { height: auto; }
    AcceptScreen #preview { height: auto; max-height: 45vh; }
    """

    def __init__(self, receipt: Receipt) -> None:
        super().__init__()
        self.receipt = receipt

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("Accept this outcome?", style="bold"))
            with VerticalScroll(id="preview"):
                yield Static(preview(self.receipt))
            with Horizontal(classes="buttons"):
                yield Button("Back", id="no")
                yield Button("Accept", id="yes", variant="success")
        yield ChitFooter()

    def on_mount(self) -> None:
        # Enter accepts a success at once; an error result starts on "Back".
        self.query_one("#yes" if is_success(self.receipt) else "#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
