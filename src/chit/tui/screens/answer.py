"""Answer one prompt: an input request or an agent's question, as a form or a URL to visit.

Both kinds are answered through the same form (``chit.receipts.forms``) and checked
with the same rules (``chit.receipts.answers.validate_answer``) that ``chit answer``
and the Supervisor use, so the TUI never sends what they would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from chit.receipts import InputKind, InputRequest, Receipt
from chit.receipts.answers import validate_answer
from chit.receipts.forms import form_from_schema
from chit.tui.view import Question
from chit.tui.widgets.schema_form import SchemaForm

Answer = tuple[str, dict[str, Any] | None]
"""``(action, content)``: action is ``accept``, ``decline`` or ``cancel``."""

FREE_TEXT = "answer"
"""The one field of a question asked without a schema (the answer is its text)."""

FREE_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {FREE_TEXT: {"type": "string", "title": "Answer"}},
    "required": [FREE_TEXT],
}
"""The form of a schemaless ``work_ask`` question: one required line of text."""


@dataclass(frozen=True)
class Ask:
    """What the answer screen shows, whatever asked it.

    Attributes:
        heading: the first line (what asks, and about what).
        context: a dim second line (purpose), if any.
        message: the question itself.
        schema: the form's JSON schema (None with ``url`` or ``unanswerable``).
        url: the page a URL-mode elicitation sends the user to.
        unanswerable: why chit cannot answer it here (decline or cancel only).
    """

    heading: Text
    context: str | None
    message: str
    schema: Any = None
    url: str | None = None
    unanswerable: str | None = None

    @classmethod
    def for_request(cls, receipt: Receipt, request: InputRequest) -> Ask:
        """An input request of a receipt (form or URL mode)."""
        heading = Text.assemble(
            ("Input required", "bold"),
            f"  {receipt.server}/{receipt.tool}  {receipt.receipt_id[-6:]}",
        )
        url_mode = request.kind is InputKind.URL or request.url is not None
        other = None
        if not url_mode and request.kind is not InputKind.ELICITATION:
            other = f"chit cannot answer {request.kind.value} requests; decline or cancel."
        return cls(
            heading,
            receipt.purpose,
            request.message or "(no message)",
            schema=request.requested_schema,
            url=(request.url or "?") if url_mode else None,
            unanswerable=other,
        )

    @classmethod
    def for_question(cls, question: Question) -> Ask:
        """An agent's ``work_ask`` question (its schema, or one free-text field)."""
        heading = Text.assemble(("Agent question", "bold"), f"  work: {question.work_label}")
        return cls(
            heading,
            question.item_id if question.record is not None else None,
            question.question,
            schema=question.schema if question.schema is not None else FREE_TEXT_SCHEMA,
        )


class AnswerScreen(ModalScreen[Answer | None]):
    """The prompt, its form, and accept / decline / cancel; Esc closes without answering."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back", id="chit.dialog.back"),
        Binding("ctrl+s", "send", "Send", id="chit.answer.send"),
    ]

    def __init__(self, ask: Ask) -> None:
        super().__init__()
        self.ask = ask
        self.form = form_from_schema(ask.schema)

    @property
    def url_mode(self) -> bool:
        """True for URL-mode elicitation: the user acts on a web page, not in a form."""
        return self.ask.url is not None

    def compose(self) -> ComposeResult:
        ask = self.ask
        with VerticalScroll(classes="dialog", id="answer"):
            yield Static(ask.heading)
            if ask.context:
                yield Static(Text(ask.context, style="dim"))
            yield Static(Text(ask.message, style="bold"), id="prompt")
            if ask.url is not None:
                yield Static(
                    Text.assemble("Open this page to continue:\n", (ask.url, "underline bold")),
                    id="url",
                )
            elif ask.unanswerable:
                yield Static(ask.unanswerable)
            else:
                yield SchemaForm(self.form, id="form")
            yield Static("", id="form-error", classes="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Decline", id="decline", variant="warning")
                yield Button("Done" if self.url_mode else "Accept", id="accept", variant="success")

    def on_mount(self) -> None:
        forms = self.query(SchemaForm)
        if forms and self.form.fields:
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
        # The whole-answer check catches what no single field can: required fields the
        # form could not build, unknown fields.
        problems = [] if errors else validate_answer(self.ask.schema, content)
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
