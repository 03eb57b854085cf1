"""Typed modal dialogs: yes/no before destructive steps, and a reason for a rejection."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from chit.tui.safe import plain
from chit.tui.screens.base import ChitModal
from chit.tui.widgets.footer import ChitFooter


class ConfirmScreen(ChitModal[bool]):
    """Ask a yes/no question; dismisses with True only for an explicit yes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(False)", "Back", id="chit.dialog.back"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question, self.yes, self.no = question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(plain(self.question))
            with Horizontal(classes="buttons"):
                yield Button(self.no, id="no")
                yield Button(self.yes, id="yes", variant="error")
        yield ChitFooter()

    def on_mount(self) -> None:
        # The safe answer has the focus: a stray Enter never cancels a task.
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class ReasonScreen(ChitModal[str | None]):
    """Ask for a non-empty reason (rejecting an outcome); None when abandoned."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back", id="chit.dialog.back"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(plain(self.question))
            yield Input(placeholder="what is wrong with the result", id="why")
            yield Static("", id="why-error", classes="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Back", id="back")
                yield Button("Reject", id="reject", variant="error")
        yield ChitFooter()

    @on(Input.Submitted)
    @on(Button.Pressed, "#reject")
    def _reject(self) -> None:
        why = self.query_one("#why", Input).value.strip()
        if not why:
            self.query_one("#why-error", Static).update("A reason is required: the agent reads it.")
            return
        self.dismiss(why)

    @on(Button.Pressed, "#back")
    def _back(self) -> None:
        self.dismiss(None)
