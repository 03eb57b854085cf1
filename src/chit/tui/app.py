"""``ChitApp``: wiring, global bindings, which key works where, the palette.

Screens never touch the store: the app's feed (:mod:`chit.tui.feed`) keeps a live model
and publishes a frozen :class:`~chit.tui.view.Snapshot` through the ``snapshot``
reactive, which the screens watch (data flows down). Blocking calls run in workers
owned by whoever needs the result (:mod:`chit.tui.work`); a failure is a toast and a log
line, never a dead app.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.screen import Screen

from chit import clock
from chit.receipts import Acceptance, Receipt
from chit.tui.actions import ActionsMixin
from chit.tui.alerts import AlertTracker
from chit.tui.backend import Backend
from chit.tui.config import TuiSettings
from chit.tui.context import Place, allowed
from chit.tui.feed import Feed
from chit.tui.safe import clean
from chit.tui.view import EMPTY, Snapshot
from chit.tui.work import WorkOwner

UNDO_WINDOW = timedelta(seconds=15)
"""How long the last verdict can be taken back with ``u``."""


class ChitApp(Feed, ActionsMixin, WorkOwner, App[None]):
    """The chit supervisor TUI.

    Args:
        backend: store access and the engine's operations for one home.
        settings: theme, bell, tick and keymap (``config.toml``).
        tick: seconds between clock ticks; ``None`` disables the timer (tests, snapshots).
        home_label: how the title names the home (default: its path).
    """

    CSS_PATH = "chit.tcss"
    TITLE = "chit"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", id="chit.help", tooltip="Keys and ids"),
        Binding("r", "answer", "Answer", id="chit.answer", tooltip="Answer the prompt"),
        Binding("a", "accept", "Accept", id="chit.accept", tooltip="Accept the outcome"),
        Binding("x", "reject", "Reject", id="chit.reject", tooltip="Reject, with a reason"),
        Binding("c", "cancel_task", "Cancel", id="chit.cancel", tooltip="Cancel the task"),
        Binding("u", "undo", "Undo", id="chit.undo", tooltip="Take back the last verdict"),
        Binding("i", "inbox", "Inbox", id="chit.inbox", tooltip="Prompts waiting for you"),
        Binding("n", "new_call", "New", id="chit.new_call", tooltip="Start a tool as a task"),
        Binding("s", "servers", "Servers", id="chit.servers", tooltip="Registered servers"),
        Binding(
            "l", "protocol_log", "Log", id="chit.protocol_log", tooltip="The server's protocol log"
        ),
        Binding("ctrl+r", "reconcile", "Reconcile", id="chit.reconcile", show=False),
        Binding("q", "quit", "Quit", id="chit.quit", tooltip="Leave chit"),
    ]

    snapshot: var[Snapshot] = var(EMPTY, always_update=True, init=False)
    """The latest view of the home; screens watch it. A ``var``: the watchers repaint
    what changed, where a ``reactive`` also repainted the whole screen on every publish."""

    def __init__(
        self,
        backend: Backend,
        settings: TuiSettings | None = None,
        *,
        tick: float | None = 1.0,
        home_label: str | None = None,
    ) -> None:
        super().__init__()
        self.home_label = home_label or str(backend.home.root)
        self.backend = backend
        self.settings = settings or TuiSettings()
        self.tick_s = tick
        self.alerts = AlertTracker()
        self.last_verdict: tuple[str, Acceptance, datetime] | None = None
        self._context_key: object = None
        self.theme = self.settings.theme
        self.init_feed()
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)

    @property
    def readonly(self) -> bool:
        """True when no action may change anything."""
        return self.backend.mode.readonly

    @property
    def home_path(self) -> Path:
        """The home this app shows."""
        return self.backend.home.root

    def on_mount(self) -> None:
        from chit.tui.screens.main import MainScreen

        self.push_screen(MainScreen())
        self.backend.subscribe(self.forward_event)
        self.refresh_data()
        if self.tick_s:
            self.set_interval(self.tick_s, self.tick)

    def on_unmount(self) -> None:
        self.backend.close()
        gc.unfreeze()  # the index was frozen (Feed._fill); let the collector have it back

    # ------------------------------------------------------------------ publishing
    def publish(self, snapshot: Snapshot) -> None:
        """Show ``snapshot`` everywhere, with a toast for what deserves one."""
        self.snapshot = snapshot
        self.refresh_context()
        for alert in self.alerts.diff(snapshot):
            self.notify(alert.message, title=alert.title, severity=alert.severity)
            if self.settings.bell:
                self.bell()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast whose text is never read as markup (it often quotes a server)."""
        del markup
        super().notify(
            clean(message), title=clean(title), severity=severity, timeout=timeout, markup=False
        )

    # ------------------------------------------------------------------ context
    def place(self, screen: Screen[Any] | None = None) -> Place:
        """Where the person is (the active screen's kind)."""
        from chit.tui.screens.help import HelpScreen

        screen = screen or self.screen
        if isinstance(screen, HelpScreen):
            return Place.HELP
        return getattr(screen, "PLACE", Place.MODAL)

    def refresh_context(self) -> None:
        """Refresh the footer's keys only when what decides them changed.

        ``refresh_bindings`` recomposes the footer and lays the screen out again: on every
        published snapshot it was most of an idle TUI's cost, and a snapshot seldom
        changes which keys work (the selected receipt's state, the screen, read-only).
        """
        screen = self.screen
        own = getattr(screen, "check_action", None)
        key = (
            id(screen),
            tuple(self.allows(b.action, screen) for b in self._bindings_of_app()),
            tuple(
                own(b.action, ()) if callable(own) else True
                for b in getattr(screen, "BINDINGS", ())
                if isinstance(b, Binding)
            ),
        )
        if key != self._context_key:
            self._context_key = key
            self.refresh_bindings()

    def can_undo(self) -> bool:
        """True while the last verdict may still be taken back."""
        last = self.last_verdict
        return last is not None and clock.now() - last[2] <= UNDO_WINDOW

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Show a key only where it works (greyed out when read-only forbids it)."""
        return self.allows(action, self.screen)

    def allows(self, action: str, screen: Screen[Any]) -> bool | None:
        """:func:`chit.tui.context.allowed` for ``action`` on ``screen``."""
        if action not in {b.action for b in self._bindings_of_app()}:
            return True
        selected = getattr(screen, "selected_receipt", None)
        prompt = getattr(screen, "has_prompt", None)
        server = getattr(screen, "selected_server", None)
        return allowed(
            action,
            self.place(screen),
            selected() if callable(selected) else None,
            readonly=self.readonly,
            has_prompt=bool(prompt()) if callable(prompt) else False,
            can_undo=self.can_undo(),
            server=server() if callable(server) else None,
        )

    @classmethod
    def _bindings_of_app(cls) -> list[Binding]:
        return [b for b in cls.BINDINGS if isinstance(b, Binding)]

    def remember_verdict(self, receipt: Receipt, before: Acceptance) -> None:
        """Offer ``u`` for a while to take back the verdict just given."""
        self.last_verdict = (receipt.receipt_id, before, clock.now())
        self.refresh_bindings()
        self.set_timer(UNDO_WINDOW.total_seconds() + 0.1, self.refresh_bindings)

    # ------------------------------------------------------------------ palette
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Only what works on ``screen`` (the one under the palette).

        Textual's own entries are left out but the theme: its "Quit" would end chit
        from inside a dialog, and "Screenshot" writes a file into the working directory.
        """
        yield SystemCommand("view: theme", "Change the colour theme", self.action_change_theme)
        for _binding_id, title, help_text, action in COMMAND_ENTRIES:
            if self.allows(action, screen):
                yield SystemCommand(title, help_text, partial(self.run_action, action))
        if self.place(screen) is Place.MAIN:
            for title, help_text, action in (
                ("filter: edit", "Filter by state:, server:, work: or text", "filter"),
                ("receipt: detail", "Open the selected receipt", "open_detail"),
                ("view: pause / resume", "Freeze the list while you read it", "pause"),
            ):
                yield SystemCommand(title, help_text, partial(screen.run_action, action))
            for state in ("input_required", "working", "completed", "failed", "cancelled"):
                yield SystemCommand(
                    f"filter: state:{state}",
                    f"Show only {state} receipts",
                    partial(self.set_filter, f"state:{state}"),
                )
            yield SystemCommand("filter: clear", "Show every receipt", partial(self.set_filter, ""))


COMMAND_ENTRIES: tuple[tuple[str, str, str, str], ...] = (
    ("chit.inbox", "inbox: open", "Prompts waiting for an answer", "inbox"),
    ("chit.answer", "receipt: answer", "Answer the selected receipt's prompt", "answer"),
    ("chit.cancel", "receipt: cancel", "Ask the server to cancel the selected task", "cancel_task"),
    ("chit.accept", "receipt: accept", "Accept the selected outcome", "accept"),
    ("chit.reject", "receipt: reject", "Reject the selected outcome, with a reason", "reject"),
    ("chit.undo", "receipt: undo verdict", "Take back the verdict just given", "undo"),
    ("chit.new_call", "call: new", "Start a tool on a server as a task", "new_call"),
    ("chit.servers", "servers: show", "Connections, protocol and task support", "servers"),
    (
        "chit.protocol_log",
        "servers: protocol log",
        "The JSON-RPC messages exchanged with the selected server",
        "protocol_log",
    ),
    ("chit.reconcile", "reconcile now", "Check every live receipt now", "reconcile"),
    ("chit.help", "help: keys", "Every key and its keymap id", "help"),
)
"""Palette entries: binding id, title, help, action (shown where the action works)."""
