"""New call: server → tool → form from its input schema → purpose → start as a task.

The connection to the chosen server runs in a worker owned by this screen: ``Esc``
while it says "connecting…" closes the screen, the worker is cancelled with it, and its
late answer is dropped (it once crashed the app with ``NoMatches: '#tool'``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from chit.receipts.forms import form_from_schema
from chit.tui.context import Place
from chit.tui.probe import Probe, ToolEntry
from chit.tui.safe import one_line, plain
from chit.tui.screens.base import ChitScreen
from chit.tui.widgets.footer import ChitFooter
from chit.tui.widgets.schema_form import SchemaForm


@dataclass(frozen=True)
class CallRequest:
    """What the user asked to start."""

    server: str
    tool: str
    arguments: dict[str, Any]
    purpose: str | None
    work_ref: str | None


class NewCallScreen(ChitScreen[CallRequest | None]):
    """A step-by-step form; dismisses with the request, or None on Esc."""

    PLACE = Place.FORM
    AUTO_FOCUS = "#server"
    BINDING_GROUP_TITLE = "New call"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back", id="chit.back"),
        Binding("ctrl+s", "start", "Start", id="chit.new_call.start"),
    ]
    DEFAULT_CSS = """
    NewCallScreen #call { padding: 0 2; height: 1fr; }
    NewCallScreen Label { margin-top: 1; text-style: bold; }
    NewCallScreen #tool-info { color: $foreground; height: auto; }
    NewCallScreen #args { height: auto; }
    NewCallScreen .buttons { height: auto; margin-top: 1; }
    NewCallScreen .buttons Button { margin-right: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.probe_result: Probe | None = None
        self.tool: ToolEntry | None = None

    def compose(self) -> ComposeResult:
        yield Static("New call", classes="screen-title")
        with VerticalScroll(id="call"):
            yield Label("Server")
            yield Select[str]([], id="server", prompt="loading servers…")
            yield Label("Tool")
            yield Select[str]([], id="tool", prompt="choose a server first", disabled=True)
            yield Static("", id="tool-info")
            yield Vertical(id="args")
            yield Label("Purpose (one line: why this call)")
            yield Input(placeholder="e.g. nightly report for the sales team", id="purpose")
            yield Label("Work record (optional id)")
            yield Input(placeholder="W-…", id="work")
            yield Static("", id="call-error", classes="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Start as a task", id="start", variant="primary")
                yield Button("Back", id="back")
        yield ChitFooter()

    def on_mount(self) -> None:
        self.submit(self.chit.backend.servers, description="Reading servers", done=self._servers)

    def _servers(self, specs: list[Any]) -> None:
        select = self.query_one("#server", Select)
        select.set_options([(plain(one_line(s.name)), s.name) for s in specs])
        select.prompt = (
            "choose a server" if specs else "no servers: add one with `chit servers add`"
        )

    @on(Select.Changed, "#server")
    def _server_chosen(self, event: Select.Changed) -> None:
        if event.value is Select.NULL:
            return
        self.probe_result, self.tool = None, None
        tools = self.query_one("#tool", Select)
        tools.set_options([])
        tools.disabled, tools.prompt = True, f"connecting to {one_line(event.value)}…"
        self.submit(
            self.chit.backend.probe,
            str(event.value),
            description="Connect",
            done=self._probed,
            group="probe",
            exclusive=True,
        )

    def _probed(self, result: Probe) -> None:
        self.probe_result = result
        tools = self.query_one("#tool", Select)
        tools.set_options([(self._tool_label(t), t.name) for t in result.tools])
        tools.disabled, tools.prompt = False, "choose a tool"
        info = Text.assemble(
            (one_line(result.server_name or result.server), "bold"),
            f" · protocol {one_line(result.protocol_version)} · {one_line(result.tasks_detail)}",
        )
        self.query_one("#tool-info", Static).update(info)
        tools.focus()

    @staticmethod
    def _tool_label(tool: ToolEntry) -> Text:
        # Text, not str: a Select reads a str label as markup ("[optional]" vanished).
        label = Text(one_line(tool.name))
        label.append(f"  [{one_line(tool.task_support)}]", style="italic")
        return label

    @on(Select.Changed, "#tool")
    async def _tool_chosen(self, event: Select.Changed) -> None:
        if self.probe_result is None or event.value is Select.NULL:
            return
        self.tool = next(t for t in self.probe_result.tools if t.name == event.value)
        info = plain(self.tool.description or "", "italic")
        if self.tool.why_not_task:
            info.append(f"\nNot a task: {self.tool.why_not_task}.", style="bold")
        self.query_one("#tool-info", Static).update(info)
        args = self.query_one("#args", Vertical)
        await args.remove_children()
        form = form_from_schema(self.tool.input_schema)
        await args.mount(SchemaForm(form, extra=True, id="arguments"))

    @on(Button.Pressed, "#back")
    def _back(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        """Validate and return the request; otherwise show the first problem on screen."""
        error = self.query_one("#call-error", Static)
        server = self.query_one("#server", Select).value
        if server is Select.NULL or self.tool is None:
            error.update("Choose a server and a tool first.")
            error.scroll_visible(animate=False)
            return
        forms = self.query(SchemaForm)
        arguments, errors = forms.first().collect() if forms else ({}, {})
        if errors:
            error.update(f"{len(errors)} argument(s) need attention (marked ↳ above).")
            forms.first().show_first_error()
            return
        error.update("")
        purpose = self.query_one("#purpose", Input).value.strip() or None
        work = self.query_one("#work", Input).value.strip() or None
        self.dismiss(CallRequest(str(server), self.tool.name, arguments, purpose, work))
