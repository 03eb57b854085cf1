"""Answer one input request: a form from its schema, or the URL to visit."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from chit.receipts import InputKind, InputRequest, Receipt
from chit.tui.forms import fields_from_schema, validate_content
from chit.tui.widgets.schema_form import SchemaForm

Answer = tuple[str, dict[str, Any] | None]
"""``(action, content)``: action is ``accept``, ``decline`` or ``cancel``."""


class AnswerScreen(ModalScreen[Answer | None]):
    """The prompt, its form, and accept / decline / cancel; Esc closes without answering."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back", id="chit.dialog.back"),
        Binding("ctrl+s", "send", "Send", id="chit.answer.send"),
    ]

    def __init__(self, receipt: Receipt, request: InputRequest) -> None:
        super().__init__()
        self.receipt, self.request = receipt, request
        self.fields = fields_from_schema(request.requested_schema)

    @property
    def url_mode(self) -> bool:
        """True for URL-mode elicitation: the user acts on a web page, not in a form."""
        return self.request.kind is InputKind.URL or self.request.url is not None

    def compose(self) -> ComposeResult:
        r, req = self.receipt, self.request
        with VerticalScroll(classes="dialog", id="answer"):
            yield Static(
                Text.assemble(
                    ("Input required", "bold"), f"  {r.server}/{r.tool}  {r.receipt_id[-6:]}"
                )
            )
            if r.purpose:
                yield Static(Text(r.purpose, style="dim"))
            yield Static(Text(req.message or "(no message)", style="bold"), id="prompt")
            if self.url_mode:
                yield Static(
                    Text.assemble(
                        "Open this page to continue:\n", (req.url or "?", "underline bold")
                    ),
                    id="url",
                )
            elif req.kind in (InputKind.ELICITATION,):
                yield SchemaForm(self.fields, id="form")
            else:
                yield Static(f"chit cannot answer {req.kind.value} requests; decline or cancel.")
            yield Static("", id="form-error", classes="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Decline", id="decline", variant="warning")
                yield Button("Done" if self.url_mode else "Accept", id="accept", variant="success")

    def on_mount(self) -> None:
        forms = self.query(SchemaForm)
        if forms and self.fields:
            forms.first().focus_first()
        else:
            self.query_one("#accept", Button).focus()

    def action_send(self) -> None:
        """Validate and send an ``accept`` answer."""
        self._accept()

    @on(Button.Pressed, "#accept")
    def _accept(self) -> None:
        if self.url_mode:
            self.dismiss(("accept", None))
            return
        forms = self.query(SchemaForm)
        if not forms:
            return
        content, errors = forms.first().collect()
        problems = [] if errors else validate_content(self.request.requested_schema, content)
        box = self.query_one("#form-error", Static)
        if errors or problems:
            box.update("; ".join(problems) or f"{len(errors)} field(s) need attention")
            return
        self.dismiss(("accept", content))

    @on(Button.Pressed, "#decline")
    def _decline(self) -> None:
        self.dismiss(("decline", None))

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(("cancel", None))
