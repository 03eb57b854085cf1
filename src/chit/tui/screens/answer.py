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
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Static

from chit.receipts import InputKind, InputRequest, Receipt
from chit.receipts.answers import answer_problems, validate_answer
from chit.receipts.forms import form_from_schema
from chit.tui.safe import clean, one_line, plain
from chit.tui.screens.base import ChitModal
from chit.tui.view import Question
from chit.tui.widgets.footer import ChitFooter
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
        context: an italic second line (purpose), if any.
        message: the question itself.
        schema: the form's JSON schema (None with ``url`` or ``unanswerable``).
        url: the page a URL-mode elicitation sends the user to.
        unanswerable: why chit cannot answer it here (decline or cancel only).
        question: an agent's question (declining withdraws it; there is no separate
            "cancel request").
    """

    heading: Text
    context: str | None
    message: str
    schema: Any = None
    url: str | None = None
    unanswerable: str | None = None
    question: bool = False
    kind: InputKind | None = None
    """The prompt's kind: a roots answer is checked beyond its schema (``file://``)."""

    @classmethod
    def for_request(cls, receipt: Receipt, request: InputRequest) -> Ask:
        """An input request of a receipt (form or URL mode)."""
        heading = Text.assemble(
            ("Input required", "bold"),
            f"  {one_line(receipt.server)}/{one_line(receipt.tool)}  {receipt.receipt_id[-6:]}",
        )
        url_mode = request.kind is InputKind.URL or request.url is not None
        other = None
        formed = request.kind is InputKind.ELICITATION or request.requested_schema is not None
        if not url_mode and not formed:  # sampling and roots come with chit's forms
            other = f"chit cannot answer {request.kind.value} requests; decline or cancel."
        return cls(
            heading,
            receipt.purpose,
            request.message or "(no message)",
            schema=request.requested_schema,
            url=(request.url or "?") if url_mode else None,
            unanswerable=other,
            kind=request.kind,
        )

    @classmethod
    def for_question(cls, question: Question) -> Ask:
        """An agent's ``work_ask`` question (its schema, or one free-text field)."""
        heading = Text.assemble(
            ("Agent question", "bold"), f"  work: {one_line(question.work_label)}"
        )
        return cls(
            heading,
            question.item_id if question.record is not None else None,
            question.question,
            schema=question.schema if question.schema is not None else FREE_TEXT_SCHEMA,
            question=True,
        )


class AnswerScreen(ChitModal[Answer | None]):
    """The prompt, its form, and what each button sends; Esc closes without sending.

    The buttons say what they send: "Send" (the answer), "Decline" (the person will not
    answer) and "Cancel request" (the elicitation's ``cancel``: for many servers that
    ends the asking task). Closing the dialog is ``Esc``, never a button that sends.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Close (sends nothing)", id="chit.dialog.back"),
        Binding("ctrl+s", "send", "Send", id="chit.answer.send"),
    ]
    DEFAULT_CSS = """
    AnswerScreen > .dialog { height: auto; }
    AnswerScreen #answer-body { height: auto; max-height: 45vh; }
    """

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
        with Vertical(classes="dialog", id="answer"):
            yield Static(ask.heading)
            with VerticalScroll(id="answer-body"):
                if ask.context:
                    yield Static(plain(one_line(ask.context), "italic"))
                yield Static(plain(ask.message, "bold"), id="prompt")
                if ask.url is not None:
                    url = Text("Open this page to continue:\n")
                    url.append(clean(ask.url), style="underline bold")
                    yield Static(url, id="url")
                elif ask.unanswerable:
                    yield Static(plain(ask.unanswerable))
                else:
                    yield SchemaForm(self.form, id="form")
                yield Static("", id="form-error", classes="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Done" if self.url_mode else "Send", id="accept", variant="success")
                yield Button("Decline", id="decline", variant="warning")
                if not ask.question:
                    yield Button("Cancel request", id="cancel", variant="error")
        yield ChitFooter()

    def on_mount(self) -> None:
        forms = self.query(SchemaForm)
        if forms and self.form.fields:
            forms.first().focus_first()
        else:
            self.query_one("#accept", Button).focus()

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        """Enter in the only field of a form sends it (when it is valid)."""
        event.stop()
        if len(self.form.fields) == 1:
            self._accept()

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
        if not errors and not problems and self.ask.kind is not None:
            problems = answer_problems(self.ask.kind, content)
        box = self.query_one("#form-error", Static)
        if errors or problems:
            box.update(plain("; ".join(problems) or f"{len(errors)} field(s) need attention"))
            if errors:
                forms.first().show_first_error()
            else:
                box.scroll_visible(animate=False)
            return
        self.dismiss(("accept", content))

    @on(Button.Pressed, "#decline")
    def _decline(self) -> None:
        self.dismiss(("decline", None))

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(("cancel", None))
