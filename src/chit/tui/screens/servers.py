"""Servers: connection, protocol version, task support, and why calls were not tasks."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from chit.receipts import Receipt
from chit.tui.context import Place
from chit.tui.health import words
from chit.tui.probe import Probe
from chit.tui.safe import one_line, plain, plain_line
from chit.tui.screens.base import ChitScreen
from chit.tui.widgets.footer import ChitFooter


def render_probe(result: Probe) -> RichGroup:
    """Protocol, task support and every tool's task support (server text is literal)."""
    tools = Table(box=None, padding=(0, 1), header_style="italic")
    tools.add_column("tool", no_wrap=True)
    tools.add_column("task support", no_wrap=True)
    tools.add_column("note")
    for tool in result.tools:
        note = tool.why_not_task or one_line(tool.title or "")
        tools.add_row(plain_line(tool.name), plain_line(tool.task_support), plain(note))
    name = plain_line(result.server_name or result.server, "bold")
    if result.server_version:
        name.append(" " + one_line(result.server_version))
    return RichGroup(
        name,
        Text(f"protocol {result.protocol_version} · generation {result.generation or '—'}"),
        plain_line(f"task support: {result.tasks_detail}"),
        Text(""),
        tools,
    )


def session_cell(status: Any | None) -> Text:
    """The engine's session of a server in a few words, with the proxy hosts on it."""
    if status is None:
        return Text("—")
    if status.connected:
        text = "connected"
    elif status.failures:
        text = f"failing ×{status.failures}"
    else:
        text = "idle"
    if status.hosts:
        n = len(status.hosts)
        text += f" · {n} host" + ("s" if n > 1 else "")
    return Text(text)


def render_status(status: Any) -> Text:
    """The highlighted server's session and the hosts connected through ``chit proxy``."""
    out = Text()
    if status.connected:
        line = "session: connected"
        if status.session_started_at is not None:
            line += " since " + status.session_started_at.astimezone().strftime("%H:%M:%S")
        if status.pid:
            line += f" · pid {status.pid}"
        out.append(line + "\n")
    else:
        out.append("session: not connected\n")
        if status.last_error:
            out.append("last error: ")
            out.append(plain_line(words(status.last_error)))
            out.append("\n")
    out.append(f"live receipts: {status.live_receipts}\n")
    if status.hosts:
        out.append("hosts through chit proxy:\n", style="bold")
        for host in status.hosts:
            out.append("• ")
            out.append(plain_line(host.label))
            if host.protocol:
                out.append(f" (protocol {one_line(host.protocol)})")
            out.append("\n")
    else:
        out.append("no host connected through chit proxy\n", style="italic")
    return out


def render_not_tasks(receipts: list[Receipt]) -> Text:
    """Recent calls answered synchronously, each with the reason."""
    if not receipts:
        return Text("Every recorded call became a task.", style="italic")
    text = Text("Calls that were not tasks:\n", style="bold")
    for r in receipts:
        text.append(
            one_line(f"• {r.server}/{r.tool} {r.receipt_id[-6:]}: {r.not_task_reason}") + "\n"
        )
    return text


class ServersScreen(ChitScreen[None]):
    """Registered servers; the highlighted one is probed (connected) in a worker."""

    PLACE = Place.SERVERS
    AUTO_FOCUS = "#servers"
    BINDING_GROUP_TITLE = "Servers"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="chit.back"),
        Binding("p", "probe", "Connect", id="chit.servers.probe", tooltip="Connect and list tools"),
    ]
    DEFAULT_CSS = """
    ServersScreen #servers-body { height: 1fr; }
    ServersScreen DataTable { width: 45%; }
    ServersScreen #server-detail { width: 1fr; padding: 0 1; border-left: vkey $primary; }
    """

    def __init__(self) -> None:
        super().__init__()
        # Set before mounting: the footer asks for the selection from the first frame.
        self.specs: list[Any] = []
        self.statuses: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        yield Static("Servers", classes="screen-title")
        with Horizontal(id="servers-body"):
            yield DataTable[Text](id="servers", cursor_type="row")
            with VerticalScroll(id="server-detail"):
                yield Static("", id="status")
                yield Static("", id="probe")
                yield Static("", id="not-tasks")
        yield ChitFooter()

    def on_mount(self) -> None:
        table = self.query_one("#servers", DataTable)
        table.add_column("name", key="name")
        table.add_column("via", key="transport")
        table.add_column("session", key="session")
        table.add_column("target", key="target")
        self.submit(self.chit.backend.servers, description="Reading servers", done=self._show)
        self.read_status()
        self.submit(
            self.chit.backend.not_task_calls, description="Reading calls", done=self._not_tasks
        )

    def _show(self, specs: list[Any]) -> None:
        self.specs = specs
        table = self.query_one("#servers", DataTable)
        for s in specs:
            target = s.url if s.transport == "http" else " ".join([s.command or "", *s.args])
            session = session_cell(self.statuses.get(s.name))
            table.add_row(
                plain_line(s.name), Text(s.transport), session, plain_line(target), key=s.name
            )
        probe = self.query_one("#probe", Static)
        if not specs:
            probe.update(
                Text(
                    "No servers registered. Add one with `chit servers add`"
                    " or import an mcpServers file.",
                    style="italic",
                )
            )
        else:
            probe.update(Text("Press p (or Enter) to connect and list tools.", style="italic"))
        # The status read may have answered first: show the highlighted server's now, and
        # let the footer re-check its keys (they depend on a selected server), whichever
        # of the two workers ends last.
        self._highlighted()

    def read_status(self) -> None:
        """Ask the engine for every server's session and the proxy hosts on it."""
        self.submit(
            self.chit.backend.server_status,
            description="Reading server status",
            done=self._status,
            group="status",
            exclusive=True,
        )

    def _status(self, statuses: dict[str, Any]) -> None:
        self.statuses = statuses
        table = self.query_one("#servers", DataTable)
        for spec in self.specs:
            # update_width: when the list's read ended first, the column was sized for
            # an unknown session; it must grow to "connected · 1 host" as it would have
            # had the status come first (a snapshot differed by that order once).
            table.update_cell(
                spec.name, "session", session_cell(statuses.get(spec.name)), update_width=True
            )
        self._highlighted()

    def selected_server(self) -> str | None:
        """The highlighted server's name."""
        # Asked for the footer's keys at any time, also before the table is mounted.
        tables = self.query("#servers").results(DataTable)
        table = next(tables, None)
        if table is None or not 0 <= table.cursor_row < len(self.specs):
            return None
        return str(self.specs[table.cursor_row].name)

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        name = self.selected_server()
        status = self.statuses.get(name) if name is not None else None
        self.query_one("#status", Static).update(render_status(status) if status else "")
        self.chit.refresh_bindings()

    def _not_tasks(self, receipts: list[Receipt]) -> None:
        self.query_one("#not-tasks", Static).update(render_not_tasks(receipts))

    @on(DataTable.RowSelected)
    def action_probe(self) -> None:
        """Connect to the highlighted server."""
        table = self.query_one("#servers", DataTable)
        if not self.specs or not 0 <= table.cursor_row < len(self.specs):
            return
        name = self.specs[table.cursor_row].name
        self.query_one("#probe", Static).update(plain_line(f"connecting to {name}…", "italic"))
        self.submit(
            self.chit.backend.probe,
            name,
            description=f"Connect to {one_line(name)}",
            done=self._probed,
            group="probe",
            exclusive=True,
        )

    def _probed(self, result: Probe) -> None:
        self.query_one("#probe", Static).update(render_probe(result))
        self.read_status()  # the probe may have opened the session
