"""``ChitApp``: wiring, global bindings, the one worker-error handler, data loading.

Screens never touch the store: the app loads a :class:`~chit.tui.view.Snapshot` in a
thread worker and publishes it through the ``snapshot`` reactive, which the screens
watch (data flows down). Every blocking call — store reads, Supervisor actions, server
listings — runs through :meth:`ChitApp.submit`, so worker errors land in
:meth:`on_worker_state_changed` and become a readable toast instead of a dead app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from chit import clock
from chit.errors import ChitError
from chit.tui.actions import ActionsMixin
from chit.tui.alerts import AlertTracker
from chit.tui.backend import Backend
from chit.tui.config import TuiSettings
from chit.tui.messages import RefreshRequested, SnapshotLoaded, SupervisorEvent
from chit.tui.view import EMPTY, Query, Snapshot, load_snapshot, parse_filter


def readable(error: BaseException) -> str:
    """One line a person can act on (chit errors carry their own wording)."""
    if isinstance(error, ChitError):
        return error.message
    return f"{type(error).__name__}: {error}"


class ChitApp(ActionsMixin, App[None]):
    """The chit supervisor TUI.

    Args:
        backend: store access and the Supervisor's operations for one home.
        settings: theme, bell, tick and keymap (``config.toml``).
        tick: seconds between refreshes; ``None`` disables the timer (tests, snapshots).
        home_label: how the title names the home (default: its path).
    """

    CSS_PATH = "chit.tcss"
    TITLE = "chit"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", id="chit.help", tooltip="Keys and ids"),
        Binding("i", "inbox", "Inbox", id="chit.inbox", tooltip="Prompts waiting for you"),
        Binding("n", "new_call", "New call", id="chit.new_call", tooltip="Start a tool as a task"),
        Binding("s", "servers", "Servers", id="chit.servers", tooltip="Registered servers"),
        Binding("r", "answer", "Answer", id="chit.answer", tooltip="Answer the prompt"),
        Binding("c", "cancel_task", "Cancel", id="chit.cancel", tooltip="Cancel the task"),
        Binding("a", "accept", "Accept", id="chit.accept", tooltip="Accept the outcome"),
        Binding("x", "reject", "Reject", id="chit.reject", tooltip="Reject, with a reason"),
        Binding("ctrl+r", "reconcile", "Reconcile", id="chit.reconcile", show=False),
        Binding("q", "quit", "Quit", id="chit.quit", tooltip="Leave chit"),
    ]

    snapshot: reactive[Snapshot] = reactive(EMPTY, always_update=True, init=False)
    """The latest view of the store; screens watch it."""

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
        self.tick = tick
        self.query_text = ""
        self.pages = 1
        self.alerts = AlertTracker()
        self.theme = self.settings.theme
        self._callbacks: dict[Worker[Any], Callable[[Any], None]] = {}
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
        self.backend.subscribe(self._forward_event)
        self.refresh_data()
        if self.tick:
            self.set_interval(self.tick, self.refresh_data)

    def on_unmount(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ loading
    @property
    def filter_query(self) -> Query:
        """The parsed ``/`` filter."""
        return parse_filter(self.query_text)

    def set_filter(self, text: str) -> None:
        """Apply a ``/`` filter and reload from the first page."""
        self.query_text = text
        self.pages = 1
        self.refresh_data()

    def more(self) -> None:
        """Load one more page of receipts."""
        if self.snapshot.more:
            self.pages += 1
            self.refresh_data()

    def refresh_data(self) -> None:
        """Ask for a reload; queued requests collapse into one."""
        self.post_message(RefreshRequested())

    def on_refresh_requested(self, _: RefreshRequested) -> None:
        self._load(self.filter_query, self.pages)

    @work(
        thread=True,
        exclusive=True,
        group="load",
        exit_on_error=False,
        description="Reading receipts",
    )
    def _load(self, query: Query, pages: int) -> None:
        decisions = self.backend.questions()
        with self.backend.store() as store:
            snapshot = load_snapshot(store, query, clock.now(), pages, decisions)
        # post_message, not call_from_thread: a blocking hop would deadlock with an app
        # that is shutting down and waiting for this very worker.
        if not get_current_worker().is_cancelled:
            self.post_message(SnapshotLoaded(snapshot))

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self._publish(message.snapshot)

    def _publish(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        for alert in self.alerts.diff(snapshot):
            self.notify(alert.message, title=alert.title, severity=alert.severity)
            if self.settings.bell:
                self.bell()

    def _forward_event(self, event: Any) -> None:
        # Called on the Supervisor's thread: hop onto the app's loop, never touch widgets here.
        self.post_message(SupervisorEvent(event))

    def on_supervisor_event(self, message: SupervisorEvent) -> None:
        self.refresh_data()

    # ------------------------------------------------------------ the one door
    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        description: str,
        done: Callable[[Any], None] | None = None,
        group: str = "actions",
        exclusive: bool = False,
    ) -> Worker[Any]:
        """Run a blocking call in a thread worker; ``done(result)`` runs on the UI thread."""
        worker = self.run_worker(
            partial(fn, *args),
            thread=True,
            exit_on_error=False,
            group=group,
            exclusive=exclusive,
            description=description,
        )
        if done is not None:
            self._callbacks[worker] = done
        return worker

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state is WorkerState.SUCCESS:
            callback = self._callbacks.pop(worker, None)
            if callback is not None:
                callback(worker.result)
        elif event.state is WorkerState.ERROR:
            self._callbacks.pop(worker, None)
            error = worker.error or RuntimeError("unknown error")
            self.log.error(f"{worker.description}: {error!r}")
            self.notify(readable(error), title=f"{worker.description} failed", severity="error")
        elif event.state is WorkerState.CANCELLED:
            self._callbacks.pop(worker, None)

    # ------------------------------------------------------------------ palette
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding_id, title, help_text, action in COMMAND_ENTRIES:
            del binding_id
            yield SystemCommand(title, help_text, partial(self.run_action, action))
        for state in ("working", "input_required", "completed", "failed", "cancelled"):
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
    ("chit.detail", "receipt: detail", "Open the selected receipt", "open_detail"),
    ("chit.new_call", "call: new", "Start a tool on a server as a task", "new_call"),
    ("chit.servers", "servers: show", "Connections, protocol and task support", "servers"),
    ("chit.reconcile", "reconcile now", "Check every live receipt now", "reconcile"),
    ("chit.filter", "filter: edit", "Filter by state:, server:, work: or text", "filter"),
    ("chit.help", "help: keys", "Every key and its keymap id", "help"),
)
"""Palette entries: binding id, title, help, action (every action is reachable here)."""
