"""The per-server protocol log pane: what chit and a server said to each other.

``l`` opens the log of the selected receipt's server (main list, detail) or of the
highlighted server (servers screen). The messages come from the engine, redacted there;
the pane shows them literally (a server's text is never markup) and the highlighted one
in full. The last test drives a real engine and a real stdio server: the pane shows the
exchange and never the task handle.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from textual.widgets import DataTable

from chit import clock
from chit.engine.local import LocalEngine
from chit.engine.models import ProtocolMessage
from chit.home import Home
from chit.receipts import LifecycleState
from chit.tasks.client import StdioServer
from chit.tui.app import ChitApp
from chit.tui.backend import Backend, Mode
from chit.tui.config import TuiSettings
from chit.tui.engine_host import EngineHost
from chit.tui.screens.protocol_log import ProtocolLogScreen
from chit.tui.screens.servers import ServersScreen
from tests.engine_support import write_config
from tests.tui.conftest import FakeSupervisor, TestBackend, make_app
from tests.tui.helpers import screen_text, select, settle
from tests.tui.seed import NOW, rid

pytestmark = pytest.mark.anyio

H = "[b]x[/b][link=http://e.x]y[/]"
"""Hostile text: bold, a link, a closing tag that would swallow what follows."""


def messages(server: str) -> list[ProtocolMessage]:
    """A short exchange with ``server``: a call, its answer, a server error."""
    at = NOW - timedelta(seconds=3)
    return [
        ProtocolMessage(
            at=at,
            direction="sent",
            kind="request",
            method="tools/call",
            id="7",
            text='{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"greet"}}',
        ),
        ProtocolMessage(
            at=at + timedelta(milliseconds=250),
            direction="received",
            kind="response",
            id="7",
            text='{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"task#a1b2c3",'
            f'"statusMessage":"{server} says {H}"}}}}}}',
        ),
        ProtocolMessage(
            at=at + timedelta(seconds=1),
            direction="received",
            kind="error",
            id="8",
            text=f'{{"jsonrpc":"2.0","id":8,"error":{{"code":-32602,"message":"E{H}"}}}}',
        ),
    ]


class LogBackend(TestBackend):
    """Servers and probes as in the other tests, plus each server's log and session."""

    __test__ = False
    asked: ClassVar[list[str]] = []

    def protocol_log(self, server: str, limit: int = 200) -> list[Any]:
        self.asked.append(server)
        return messages(server)[-limit:]


@pytest.fixture
def log_app(tmp_path: Path) -> ChitApp:
    LogBackend.asked = []
    return make_app(tmp_path / "home", supervisor=FakeSupervisor(), backend=LogBackend)


def _kinds(app: ChitApp) -> Counter[type]:
    return Counter(type(s) for s in app.screen_stack)


async def test_l_opens_the_selected_receipts_server_log(log_app: ChitApp) -> None:
    app = log_app
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(6))  # a receipt of "reports"
        await pilot.press("l")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProtocolLogScreen) and screen.server_name == "reports"
        assert LogBackend.asked == ["reports"]
        table = screen.query_one("#messages", DataTable)
        assert table.row_count == 3
        assert table.cursor_row == 2  # newest last, and highlighted
        text = screen_text(app)
        assert "Protocol log · reports" in text
        assert "tools/call #7" in text and "→" in text and "←" in text
        assert f'"message": "E{H}"' in text  # the highlighted error, in full and literal
        assert "handles and secrets redacted" in text
        # `l` does not apply here (no second log), the app's navigation still does.
        assert app.allows("protocol_log", screen) is False
        await pilot.press("up")
        await settle(pilot)
        assert f"reports says {H}" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ProtocolLogScreen)


async def test_l_on_the_servers_screen_and_one_log_at_a_time(log_app: ChitApp) -> None:
    app = log_app
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(6))
        await pilot.press("l")
        await settle(pilot)
        await pilot.press("s")  # the servers screen over the log
        await settle(pilot)
        assert isinstance(app.screen, ServersScreen)
        assert app.screen.selected_server() == "demo"
        await pilot.press("l")  # demo's log replaces reports': never two logs
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProtocolLogScreen) and screen.server_name == "demo"
        assert max(_kinds(app).values()) == 1
        assert LogBackend.asked == ["reports", "demo"]
        await pilot.press("g")  # reload
        await settle(pilot)
        assert LogBackend.asked == ["reports", "demo", "demo"]


async def test_a_read_only_tui_has_no_log_to_open(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", mode=Mode(readonly=True), backend=LogBackend)
    LogBackend.asked = []
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(6))
        assert app.allows("protocol_log", app.screen) is None  # greyed out
        await pilot.press("l")
        await settle(pilot)
        assert not isinstance(app.screen, ProtocolLogScreen)
        assert LogBackend.asked == []


async def test_a_real_exchange_shows_without_the_task_handle(tmp_path: Path) -> None:
    """confirm_delete on the stdio demo server through an in-process engine."""
    clock.unfreeze()
    root = tmp_path / "home"
    spec = StdioServer(sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp_path / "t")])
    write_config(root, {"demo": spec})
    home = Home(root).ensure()
    env = {"CHIT_KEY_STORE": "file", "CHIT_HOME": str(root)}
    host = EngineHost(lambda: LocalEngine.open(home, environ=env, run=True), remote=False)
    app = ChitApp(Backend(home, Mode(), host), TuiSettings(theme="textual-dark"), tick=None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.submit(
            app.backend.call,
            "demo",
            "confirm_delete",
            {"filename": "a.txt"},
            "see the log",
            description="Start call",
        )
        with anyio.fail_after(60):  # the engine's events bring the prompt
            while not app.snapshot.prompts:
                await anyio.sleep(0.05)
        await settle(pilot)
        receipt = app.snapshot.prompts[0].receipt  # whole: its task handle is looked up
        assert receipt.state is LifecycleState.INPUT_REQUIRED
        local = host.engine.engine
        assert isinstance(local, LocalEngine)
        handle = host.engine.on_loop(local.supervisor.handles.task_id, receipt)
        await select(pilot, receipt.receipt_id)
        await pilot.press("l")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProtocolLogScreen)
        assert any(m.method == "tools/call" for m in screen.messages)
        whole = "\n".join(m.text for m in screen.messages) + screen_text(app)
        assert handle and handle not in whole
        assert "task#" in whole
        await pilot.press("escape", "s")
        await settle(pilot)
        assert "connected" in screen_text(app)  # the engine's session of demo
        await pilot.press("q")
