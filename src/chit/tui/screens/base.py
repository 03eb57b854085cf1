"""What every chit screen shares: owned workers, the app typed, where it is, a selection."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen

from chit.receipts import Receipt
from chit.tui.context import Place
from chit.tui.work import WorkOwner

if TYPE_CHECKING:
    from chit.tui.app import ChitApp

ResultT = TypeVar("ResultT")


class ChitScreen(WorkOwner, Screen[ResultT]):
    """A full screen; its workers die with it (see :mod:`chit.tui.work`)."""

    PLACE: ClassVar[Place] = Place.MAIN
    """Which keys act here (:func:`chit.tui.context.allowed`)."""

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def selected_receipt(self) -> Receipt | None:
        """The receipt the person has selected here, if any."""
        return None

    def has_prompt(self) -> bool:
        """True when the selected row is something to answer (the inbox's rows)."""
        return False

    def selected_server(self) -> str | None:
        """The server selected here: by default the selected receipt's."""
        receipt = self.selected_receipt()
        return receipt.server if receipt is not None else None


class ChitModal(WorkOwner, ModalScreen[ResultT]):
    """A dialog: only its own keys (and ``?``) act while it is open.

    Textual stops the key chain at a modal screen, so the app's keys never reach
    through a dialog; ``?`` is declared again here so help opens from anywhere.
    """

    PLACE: ClassVar[Place] = Place.MODAL
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "app.help", "Help", id="chit.help", tooltip="Keys and ids"),
    ]

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def selected_receipt(self) -> Receipt | None:
        """Dialogs act on what opened them, never on a selection."""
        return None

    def has_prompt(self) -> bool:
        """Dialogs have no rows to answer."""
        return False

    def selected_server(self) -> str | None:
        """Dialogs select no server."""
        return None
