"""New call: server → tool → form from its input schema → purpose → start as a task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, Select, Static

from chit.receipts.forms import form_from_schema
from chit.tui.probe import Probe, ToolEntry
from chit.tui.widgets.schema_form import SchemaForm

if TYPE_CHECKING:
    from chit.tui.app import ChitApp


@dataclass(frozen=True)
class CallRequest:
    """What the user asked to start."""

    server: str
    tool: str
    arguments: dict[str, Any]
    purpose: str | None
    work_ref: str | None


class NewCallScreen(Screen[CallRequest | None]):
    """A step-by-step form; dismisses with the request, or None on Esc."""

    BINDING_GROUP_TITLE = "New call"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back", id="chit.back"),
        Binding("ctrl+s", "start", "Start", id="chit.new_call.start"),
    ]
    DEFAULT_CSS = """
    NewCallScreen #call { padding: 0 2; }
    NewCallScreen Label { margin-top: 1; text-style: bold; }
    NewCallScreen #tool-info { color: $text-muted; height: auto; }
    NewCallScreen .buttons { height: auto; margin-top: 1; }
    NewCallScreen .buttons Button { margin-right: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.probe_result: Probe | None = None
        self.tool: ToolEntry | None = None

    @property
    def chit(self) -> ChitApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

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
        yield Footer()

    def on_mount(self) -> None:
        self.chit.submit(
            self.chit.backend.servers, description="Reading servers", done=self._servers
        )

    def _servers(self, specs: list[Any]) -> None:
        select = self.query_one("#server", Select)
        select.set_options([(s.name, s.name) for s in specs])
        select.prompt = (
            "choose a server" if specs else "no servers: add one with `chit servers add`"
        )
        select.focus()

    @on(Select.Changed, "#server")
    def _server_chosen(self, event: Select.Changed) -> None:
        if event.value is Select.NULL:
            return
        tools = self.query_one("#tool", Select)
        tools.disabled, tools.prompt = True, f"connecting to {event.value}…"
        self.chit.submit(
            self.chit.backend.probe, str(event.value), description="Connect", done=self._probed
        )

    def _probed(self, result: Probe) -> None:
        self.probe_result = result
        tools = self.query_one("#tool", Select)
        tools.set_options([(self._tool_label(t), t.name) for t in result.tools])
        tools.disabled, tools.prompt = False, "choose a tool"
        self.query_one("#tool-info", Static).update(
            f"{result.server_name or result.server} · protocol {result.protocol_version}"
            f" · {result.tasks_detail}"
        )
        tools.focus()

    @staticmethod
    def _tool_label(tool: ToolEntry) -> str:
        return f"{tool.name}  [{tool.task_support}]"

    @on(Select.Changed, "#tool")
    async def _tool_chosen(self, event: Select.Changed) -> None:
        if self.probe_result is None or event.value is Select.NULL:
            return
        self.tool = next(t for t in self.probe_result.tools if t.name == event.value)
        info = Text(self.tool.description or "", style="italic")
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
        """Validate and return the request."""
        error = self.query_one("#call-error", Static)
        server = self.query_one("#server", Select).value
        if server is Select.NULL or self.tool is None:
            error.update("Choose a server and a tool first.")
            return
        forms = self.query(SchemaForm)
        arguments, errors = forms.first().collect() if forms else ({}, {})
        if errors:
            error.update(f"{len(errors)} argument(s) need attention.")
            return
        purpose = self.query_one("#purpose", Input).value.strip() or None
        work = self.query_one("#work", Input).value.strip() or None
        self.dismiss(CallRequest(str(server), self.tool.name, arguments, purpose, work))
