"""One server's protocol log: the JSON-RPC messages chit exchanged with it (lazygit's log).

For the person who needs to see why a task did what it did. The engine keeps the last
few hundred messages per server in memory and redacts them when asked (every task
handle and configured secret replaced by its marker, any unsealed ``taskId`` masked:
:mod:`chit.reconcile.protocol_log`); this screen only shows them, every string through
:mod:`chit.tui.safe` (a server's text is never read as markup).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from chit.tui.context import Place
from chit.tui.safe import one_line, plain, plain_line
from chit.tui.screens.base import ChitScreen
from chit.tui.view import Snapshot
from chit.tui.widgets.badges import palette, resolve
from chit.tui.widgets.footer import ChitFooter

LIMIT = 200
"""Messages shown (the newest; the engine keeps at most 300 per server)."""

RELOAD_S = 2.0
"""While open, the log is read again at most this often when something changed."""

ARROWS = {"sent": "→", "received": "←"}

LOG_STYLE: dict[str, str] = {
    "time": "$foreground",
    "sent": "bold $text-primary",
    "received": "bold $text-success",
    "method": "$foreground",
    "error": "bold $text-error",
    "json": "$foreground",
    "note": "italic $foreground",
}
"""Every style of this screen (theme variables, made legible by :func:`palette`);
``tests/tui/test_tui_contrast.py`` measures each against the backgrounds it is painted on."""


def clock_text(at: datetime) -> str:
    """``12:03:04.123`` in local time (messages are seconds apart, sometimes less)."""
    local = at.astimezone()
    return local.strftime("%H:%M:%S.") + f"{local.microsecond // 1000:03d}"


def what(message: Any) -> str:
    """The method, or for a response the id it answers (``#3``), with the kind."""
    if message.method:
        return f"{message.method}" + (f" #{message.id}" if message.id else "")
    if message.id:
        return f"{message.kind} #{message.id}"
    return str(message.kind)


def pretty(text: str) -> str:
    """The message's JSON indented (as sent when it is not JSON: a cut message)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


class ProtocolLogScreen(ChitScreen[None]):
    """The protocol log of ``server``: newest last; the highlighted message in full."""

    PLACE = Place.LOG
    AUTO_FOCUS = "#messages"
    BINDING_GROUP_TITLE = "Protocol log"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
        Binding("g", "reload", "Reload", id="chit.log.reload", tooltip="Read the log again"),
    ]
    DEFAULT_CSS = """
    ProtocolLogScreen #messages { height: 1fr; }
    ProtocolLogScreen #message { height: 40%; border-top: hkey $primary; padding: 0 1; }
    ProtocolLogScreen #log-note { padding: 0 1; color: $foreground; }
    """

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server_name = server
        self.messages: tuple[Any, ...] = ()
        self._read_at = 0.0

    def compose(self) -> ComposeResult:
        title = plain_line(f"Protocol log · {self.server_name}")
        yield Static(title, classes="screen-title")
        yield Static(
            Text("Reading the log…", style="italic"),  # restyled once the log is read
            id="log-note",
        )
        yield DataTable[Text](id="messages", cursor_type="row")
        with VerticalScroll(id="message"):
            yield Static("", id="message-text")
        yield ChitFooter()

    def on_mount(self) -> None:
        table = self.query_one("#messages", DataTable)
        table.add_column("time", width=12, key="at")
        table.add_column("", width=1, key="dir")
        table.add_column("message", width=28, key="what")
        table.add_column("JSON", key="text")
        self.action_reload()
        self.watch(self.chit, "snapshot", self._changed, init=False)

    def _changed(self, _: Snapshot) -> None:
        # Something moved in the home (a receipt event): the server may have talked.
        # Bounded: at most one read per RELOAD_S while this screen is open.
        if time.monotonic() - self._read_at >= RELOAD_S:
            self.action_reload()

    def action_reload(self) -> None:
        """Read the server's log again from the engine."""
        self._read_at = time.monotonic()
        self.submit(
            self.chit.backend.protocol_log,
            self.server_name,
            LIMIT,
            description=f"Read the protocol log of {one_line(self.server_name)}",
            done=self._show,
            group="log",
            exclusive=True,
        )

    def _show(self, messages: list[Any]) -> None:
        table = self.query_one("#messages", DataTable)
        follow = not self.messages or table.cursor_row >= len(self.messages) - 1
        row = table.cursor_row
        self.messages = tuple(messages)
        table.clear()
        style = self.styles_of
        for i, m in enumerate(self.messages):
            table.add_row(
                Text(clock_text(m.at), style=style["time"]),
                Text(ARROWS.get(m.direction, "?"), style=style.get(m.direction, style["json"])),
                plain_line(what(m), style["error" if m.kind == "error" else "method"]),
                plain_line(m.text, style["json"]),
                key=str(i),
            )
        note = self.query_one("#log-note", Static)
        if not self.messages:
            note.update(
                Text(
                    "No messages yet: chit has not talked to this server since its engine"
                    " started (the log is kept in memory only).",
                    style=style["note"],
                )
            )
        else:
            note.update(
                Text(
                    f"{len(self.messages)} messages, newest last · → sent ← received"
                    " · handles and secrets redacted",
                    style=style["note"],
                )
            )
        if self.messages:
            last = len(self.messages) - 1
            table.move_cursor(row=last if follow else min(row, last), animate=False)
        self._highlight()

    @on(DataTable.RowHighlighted)
    def _highlight(self) -> None:
        row = self.query_one("#messages", DataTable).cursor_row
        text = self.query_one("#message-text", Static)
        if not 0 <= row < len(self.messages):
            text.update("")
            return
        m = self.messages[row]
        style = self.styles_of
        kind = "error" if m.kind == "error" else m.direction
        head = plain_line(f"{clock_text(m.at)} {m.direction} {what(m)}", style.get(kind, "bold"))
        text.update(Text.assemble(head, "\n", plain(pretty(m.text), style["json"])))

    @property
    def styles_of(self) -> dict[str, str]:
        """:data:`LOG_STYLE` resolved in the current theme (colours made legible)."""
        variables = palette(self.app.theme_variables)
        return {name: resolve(style, variables) for name, style in LOG_STYLE.items()}
