"""``?``: every key of every screen, its keymap id, and whether it works here.

Built from the bindings themselves (remapped keys show as remapped), grouped by where
they act, so the list can never drift from what the keys do. ``?`` opens it from
anywhere, dialogs included.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from chit.tui.context import Place
from chit.tui.screens.base import ChitModal
from chit.tui.widgets.footer import ChitFooter

FILTER_HELP = (
    "Filter (/):  state:working  state:input_required,failed  server:demo  work:W-1  free text\n"
    "The list is ordered by what needs you: input required, near expiry, unreachable,"
    " finished but not judged, working, judged.\n"
    'Remap keys in CHIT_HOME/config.toml:  [keymap]  "chit.cancel" = "ctrl+k"'
)

EXTRA: tuple[tuple[str, str, str], ...] = (
    ("ctrl+p", "Command palette: the actions that work here", "—"),
    ("tab / shift+tab", "Next / previous field or button", "—"),
    ("ctrl+q", "Quit from anywhere (also inside a form)", "—"),
)
"""Keys Textual provides that chit does not declare itself."""


def _sections() -> list[tuple[str, type[Any]]]:
    from chit.tui.app import ChitApp
    from chit.tui.screens.answer import AnswerScreen
    from chit.tui.screens.confirm import ConfirmScreen, ReasonScreen
    from chit.tui.screens.detail import DetailScreen
    from chit.tui.screens.inbox import InboxScreen
    from chit.tui.screens.main import MainScreen
    from chit.tui.screens.new_call import NewCallScreen
    from chit.tui.screens.protocol_log import ProtocolLogScreen
    from chit.tui.screens.servers import ServersScreen
    from chit.tui.screens.verdict import AcceptScreen

    return [
        ("Everywhere", ChitApp),
        ("Receipts (main)", MainScreen),
        ("Receipt detail", DetailScreen),
        ("Inbox", InboxScreen),
        ("Servers", ServersScreen),
        ("Protocol log", ProtocolLogScreen),
        ("New call", NewCallScreen),
        ("Answer a prompt", AnswerScreen),
        ("Accept preview", AcceptScreen),
        ("Confirm / reject dialogs", ConfirmScreen),
        ("", ReasonScreen),
    ]


class HelpScreen(ChitModal[None]):
    """Key reference: every binding with its id; ``●`` marks what works where you are."""

    PLACE = Place.HELP
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", id="chit.help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen > VerticalScroll {
        width: 100; max-width: 100%; height: 1fr;
        border: thick $primary; background: $panel; padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._table(), id="keys")
            yield Static(Text(FILTER_HELP))
        yield ChitFooter()

    def _under(self) -> Any:
        screens = [s for s in self.app.screen_stack if s is not self]
        return screens[-1] if screens else None

    def _works_here(self, owner: type[Any], binding: Binding) -> bool:
        app: Any = self.app
        under = self._under()
        if under is None:
            return False
        if owner is type(app):
            return bool(app.allows(binding.action, under))
        if type(under) is not owner:
            return False
        check = getattr(under, "check_action", None)
        return bool(check(binding.action, ())) if callable(check) else True

    def _key(self, binding: Binding) -> str:
        keymap: dict[str, str] = getattr(self.app, "_keymap", {})
        if binding.id and binding.id in keymap:
            return keymap[binding.id]
        return ", ".join(
            self.app.get_key_display(Binding(k.strip(), binding.action))
            for k in binding.key.split(",")
        )

    def _table(self) -> Table:
        table = Table(title="chit keys", expand=True, box=None, header_style="bold")
        table.add_column("", width=1, no_wrap=True)
        table.add_column("key", no_wrap=True)
        table.add_column("action")
        table.add_column("keymap id", no_wrap=True)
        for title, owner in _sections():
            if title:
                table.add_row("", Text(title, style="bold underline"), "", "")
            for binding in owner.BINDINGS:
                if not isinstance(binding, Binding) or not binding.id:
                    continue
                mark = "●" if self._works_here(owner, binding) else ""
                table.add_row(mark, self._key(binding), binding.description, binding.id)
        table.add_row("", Text("Textual", style="bold underline"), "", "")
        for key, what, ident in EXTRA:
            table.add_row("", key, what, ident)
        return table
