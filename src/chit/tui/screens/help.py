"""``?``: every key, its keymap id, and the filter grammar."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

FILTER_HELP = (
    "Filter (/):  state:working  state:input_required,failed  server:demo  work:W-1  free text\n"
    'Esc clears it. Remap keys in CHIT_HOME/config.toml:  [keymap]  "chit.cancel" = "ctrl+k"'
)


class HelpScreen(ModalScreen[None]):
    """Key reference built from the live bindings (so remapped keys show as remapped)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", id="chit.help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen > VerticalScroll {
        width: 90; max-width: 100%; height: 90%;
        border: thick $primary; background: $panel; padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._table())
            yield Static(Text(FILTER_HELP, style="dim"))

    def _table(self) -> Table:
        table = Table(title="chit keys", expand=True, box=None, header_style="bold")
        table.add_column("key", no_wrap=True)
        table.add_column("action")
        table.add_column("keymap id", style="dim", no_wrap=True)
        seen: set[str] = set()
        screens = [s for s in self.app.screen_stack if s is not self]
        nodes = [*reversed(screens[-1:]), self.app]
        for node in nodes:
            for binding in node._bindings.key_to_bindings.values():
                for b in binding:
                    if not b.id or b.id in seen or b.id.startswith("chit.help"):
                        continue
                    seen.add(b.id)
                    key = self.app.get_key_display(b)
                    table.add_row(key, b.description or b.action, b.id)
        return table
