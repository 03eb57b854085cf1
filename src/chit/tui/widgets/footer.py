"""A footer that keeps what matters when the terminal is narrow.

Textual's footer shows every active key in declaration order and lets the right end
fall off: at 80 columns "Quit" and the receipt actions went first. This one shows the
keys that work here by importance (the dialog's own keys, the selected receipt's
actions, Quit, Help, then navigation) and leaves out, whole, what does not fit.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PRIORITY: tuple[str, ...] = (
    "chit.dialog.back",
    "chit.back",
    "chit.answer.send",
    "chit.new_call.start",
    "chit.help.close",
    "chit.answer",
    "chit.accept",
    "chit.reject",
    "chit.cancel",
    "chit.undo",
    "chit.quit",
    "chit.help",
    "chit.servers.probe",
    "chit.filter",
    "chit.clear_filter",
    "chit.inbox",
    "chit.resume",
    "chit.pause",
    "chit.new_call",
    "chit.servers",
)
"""Binding ids, most important first; anything else comes after them."""

PALETTE_MIN_WIDTH = 120
"""Below this width the palette key (^p) gives its place to chit's own keys."""


def _rank(binding: Binding) -> int:
    return PRIORITY.index(binding.id) if binding.id in PRIORITY else len(PRIORITY)


class ChitFooter(Footer):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self._width = 0

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self.app.size.width
        palette = width >= PALETTE_MIN_WIDTH
        self.show_command_palette = palette
        budget = width - (12 if palette else 0)
        seen: set[str] = set()
        shown: list[tuple[Binding, bool, str]] = []
        active = self.screen.active_bindings.values()
        for _, binding, enabled, tooltip in sorted(active, key=lambda a: _rank(a[1])):
            if not binding.show or binding.action in seen:
                continue
            display = self.app.get_key_display(binding)
            cost = len(display) + len(binding.description) + 3
            if cost > budget:
                continue
            seen.add(binding.action)
            budget -= cost
            shown.append((binding, enabled, tooltip))
        self.styles.grid_size_columns = len(shown)
        for binding, enabled, tooltip in shown:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)
        if palette:
            yield from self._palette_key()

    def _palette_key(self) -> ComposeResult:
        try:
            _node, binding, enabled, _tip = self.screen.active_bindings[
                self.app.COMMAND_PALETTE_BINDING
            ]
        except KeyError:
            return
        yield FooterKey(
            binding.key,
            self.app.get_key_display(binding),
            binding.description,
            binding.action,
            classes="-command-palette",
            disabled=not enabled,
            tooltip=binding.tooltip or binding.description,
        )

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)
