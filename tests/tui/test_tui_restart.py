"""Restarts with a real demo server: the reopened app resumes reconciling and answering.

Each test closes the app and opens a new one on the same home, as a person quitting and
starting ``chit`` again. The key store is the file one (``CHIT_KEY_STORE=file``): the
memory key store forgets the data key on exit, and with it the task handles.

By default the TUI is a client of chit's daemon, which owns every server session: a
stdio server's task (and its prompt) outlives the TUI, and the reopened TUI learns how
it ended from the daemon's events (no re-read). With ``--no-daemon`` the engine runs in
the TUI's process and a stdio server stops with it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select

from chit import clock
from chit.engine.local import LocalEngine
from chit.home import Home
from chit.receipts import LifecycleState
from chit.tasks.client import HttpServer, ServerSpec, StdioServer
from chit.tasks.server.store import TaskStore
from chit.tui.app import ChitApp
from chit.tui.backend import Backend, Mode
from chit.tui.config import TuiSettings
from chit.tui.engine_host import EngineHost
from chit.tui.launch import build_app
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.inbox import InboxScreen
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.view import Row, Snapshot
from tests.daemon_support import alive, chit, daemon_env, daemon_home, daemon_pid
from tests.engine_support import write_config
from tests.interop_support import http_server
from tests.proc_support import free_port
from tests.proxy_support import demo_args
from tests.tui.helpers import screen_text, select, settle, until

pytestmark = pytest.mark.anyio

WAIT_S = 180
"""Safety net of every wait here: a Python server's start alone takes 10+ s at load 12."""

DEMO = [sys.executable, "-m", "chit", "demo-server"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private home on the file key store, on the real clock (the server's is real)."""
    root = tmp_path / "home"
    monkeypatch.setenv("CHIT_KEY_STORE", "file")
    monkeypatch.setenv("CHIT_HOME", str(root))
    clock.unfreeze()
    yield root


@pytest.fixture(autouse=True)
def patient_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The new-call form's connect gets the safety net, not a person's 10 s.

    The form's probe starts the demo server (a Python process) when no session is open
    yet; at load 12 that start alone can outlast 10 s, and the form then never lists tools.
    """
    monkeypatch.setattr("chit.tui.backend.TIMEOUT_S", float(WAIT_S))


def _register(root: Path, spec: ServerSpec) -> Home:
    write_config(root, {"demo": spec})
    return Home(root).ensure()


async def _until(
    pilot: Pilot[None], app: ChitApp, done: Callable[[Snapshot], bool], what: str
) -> None:
    """Reload until ``done(snapshot)`` holds (real servers take real time)."""
    deadline = anyio.current_time() + WAIT_S
    while not done(app.snapshot):
        assert anyio.current_time() < deadline, f"timed out waiting for {what}"
        app.refresh_data()
        await settle(pilot)
        await anyio.sleep(0.2)


async def _confirm_in_inbox(pilot: Pilot[None], app: ChitApp) -> None:
    """The one waiting prompt (confirm_delete of old.txt), answered yes from the inbox."""
    await _until(pilot, app, lambda s: len(s.prompts) > 0, "the stored prompt")
    assert [p.request.key for p in app.snapshot.prompts] == ["confirm"]
    await pilot.press("i")
    await until(pilot, lambda: isinstance(app.screen, InboxScreen), "the inbox", WAIT_S)
    await settle(pilot)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, AnswerScreen), "the answer form", WAIT_S)
    await until(pilot, lambda: "Delete old.txt?" in screen_text(app), "the question", WAIT_S)
    answer = app.screen
    assert isinstance(answer, AnswerScreen)
    answer.query_one("#field-0", Checkbox).value = True
    await pilot.press("ctrl+s")


async def _new_slow_compute(
    pilot: Pilot[None], app: ChitApp, *, seconds: str, purpose: str
) -> None:
    """Start ``slow_compute`` on the demo server through the new-call form (``n``)."""
    await pilot.press("n")
    await until(pilot, lambda: isinstance(app.screen, NewCallScreen), "the new-call form", WAIT_S)
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, NewCallScreen)
    screen.query_one("#server", Select).value = "demo"
    # The probe (or the daemon) spawns the real server.
    await until(pilot, lambda: screen.probe_result is not None, "the server's tools", WAIT_S)
    screen.query_one("#tool", Select).value = "slow_compute"
    await settle(pilot)
    screen.query_one("#field-0", Input).value = seconds
    screen.query_one("#purpose", Input).value = purpose
    await pilot.press("ctrl+s")


def _receipt(app: ChitApp, tool: str) -> Row:
    return next(r for r in app.snapshot.rows if r.tool == tool)


def _outcome(app: ChitApp, tool: str) -> object:
    """The stored outcome of ``tool``'s receipt (a table row carries no outcome)."""
    with app.backend.store() as store:
        return store.receipts.require(_receipt(app, tool).receipt_id).outcome


async def test_reopened_app_reconciles_a_task_started_before_the_restart(home: Path) -> None:
    """slow_compute starts through the new-call screen; the first app never sees it end.

    The first app's Supervisor is not reconciling (as if chit had been closed before the
    result came in); the stdio server finishes the task before it stops with the app.
    The reopened app, built by the real launcher, must find the receipt and reconcile it
    to completed by itself.
    """
    tasks_db = home.parent / "tasks.db"
    spec = StdioServer(sys.executable, [*DEMO[1:], "--db", str(tasks_db)])
    demo = _register(home, spec)
    # An engine in this process that does not reconcile (as if chit had been closed
    # before the result came in).
    host = EngineHost(lambda: LocalEngine.open(demo, run=False), remote=False)
    first = ChitApp(Backend(demo, Mode(), host), TuiSettings(bell=False), tick=None)
    async with first.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _new_slow_compute(pilot, first, seconds="0.3", purpose="survive a restart")
        await _until(pilot, first, lambda s: s.total == 1, "the receipt")
        started = _receipt(first, "slow_compute")
        with anyio.fail_after(WAIT_S):  # the server, not chit, finishes the work
            while True:
                with closing(TaskStore(tasks_db)) as tasks:
                    if not tasks.active():
                        break
                await anyio.sleep(0.1)
        assert first.snapshot.rows[0].state is LifecycleState.WORKING
        await pilot.press("q")

    again = build_app(demo, use_daemon=False)  # --no-daemon: the engine runs here
    assert isinstance(again, ChitApp)
    again.theme = "textual-dark"
    async with again.run_test(size=(160, 48)) as pilot:
        await _until(pilot, again, lambda s: s.total == 1, "the stored receipt")
        assert [r.receipt_id for r in again.snapshot.rows] == [started.receipt_id]
        await _until(
            pilot,
            again,
            lambda s: s.rows[0].state is LifecycleState.COMPLETED,
            "completed",
        )
        await select(pilot, started.receipt_id)
        shown = "Computed job in 0.3 s"
        await until(pilot, lambda: shown in screen_text(again), "the outcome shown", WAIT_S)
        assert "done" in screen_text(again)  # the table's state badge
        await pilot.press("q")


@pytest.fixture
def demo_http(home: Path) -> Iterator[str]:
    """An HTTP demo server that outlives both apps (see the test below for why)."""
    port = free_port()
    argv = [*DEMO, "--http", f"127.0.0.1:{port}", "--db", str(home.parent / "tasks.db")]
    with http_server(argv, port, log=home.parent / "server.log"):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_pending_prompt_survives_the_restart_and_is_answered_after(
    home: Path, demo_http: str
) -> None:
    """A 2026 prompt (confirm_delete) asked in one app is answered from the next.

    The server runs over HTTP here because a stdio server stops with the app, and a
    restarted chit demo server fails every task it finds unfinished ("interrupted by a
    server restart"): a prompt can only outlive chit on a server that keeps running.
    """
    demo = _register(home, HttpServer(demo_http))
    first = build_app(demo, use_daemon=False)
    assert isinstance(first, ChitApp)
    async with first.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        first.submit(
            first.backend.call,
            "demo",
            "confirm_delete",
            {"filename": "old.txt"},
            "clean up",
            description="Start call",
        )
        await _until(pilot, first, lambda s: len(s.prompts) == 1, "the prompt")
        await pilot.press("q")

    again = build_app(demo, use_daemon=False)
    assert isinstance(again, ChitApp)
    async with again.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _confirm_in_inbox(pilot, again)
        await _until(
            pilot,
            again,
            lambda s: _receipt(again, "confirm_delete").state is LifecycleState.COMPLETED,
            "completed",
        )
        outcome = _outcome(again, "confirm_delete")
        assert outcome is not None and "Deleted old.txt" in str(outcome)
        assert again.snapshot.prompts == ()
        await pilot.press("q")


# --------------------------------------------------------------------------- the daemon


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with the stdio demo server whose daemon is stopped (cleanly) at the end."""
    with daemon_home(tmp_path / "home") as root:
        env = daemon_env(root)
        ran = chit("servers", "add", "demo", *demo_args(tmp_path / "tasks.db"), env=env)
        assert ran.code == 0, ran.err
        monkeypatch.setenv("CHIT_KEY_STORE", "file")
        monkeypatch.setenv("CHIT_HOME", str(root))
        monkeypatch.delenv("CHIT_NO_DAEMON", raising=False)
        clock.unfreeze()
        yield root


async def _by_events(app: ChitApp, done: Callable[[Snapshot], bool], what: str) -> None:
    """Wait for ``done`` with no re-read: only the engine's events may bring it."""
    with anyio.fail_after(WAIT_S):
        while not done(app.snapshot):
            assert app.is_running, "the app ended"
            await anyio.sleep(0.05)
    assert app.snapshot is not None, what


async def test_a_stdio_task_outlives_the_tui_through_the_daemon(daemon: Path) -> None:
    """slow_compute on a stdio server starts from the TUI; the TUI quits while it works.

    The daemon keeps the server process (same pid after the restart) and the task runs
    to its end; the reopened TUI (``chit open``'s launcher) is told by the daemon's
    events, with no timer and no re-read.
    """
    first = build_app(Home(daemon))
    assert isinstance(first, ChitApp)
    assert first.backend.engine_events and not first.readonly
    async with first.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _new_slow_compute(pilot, first, seconds="3", purpose="outlive the TUI")
        await _by_events(first, lambda s: s.total == 1, "the receipt")
        started = _receipt(first, "slow_compute")
        status = await anyio.to_thread.run_sync(first.backend.server_status)
        pid = status["demo"].pid
        assert status["demo"].connected and pid
        await pilot.press("q")

    assert alive(pid), "the stdio server stopped with the TUI"
    again = build_app(Home(daemon))
    assert isinstance(again, ChitApp)
    async with again.run_test(size=(160, 48)) as pilot:
        await _until(pilot, again, lambda s: s.total == 1, "the stored receipt")
        assert [r.receipt_id for r in again.snapshot.rows] == [started.receipt_id]
        await _by_events(again, lambda s: s.rows[0].state is LifecycleState.COMPLETED, "completed")
        await settle(pilot)
        await select(pilot, started.receipt_id)
        shown = "Computed job in 3 s"
        await until(pilot, lambda: shown in screen_text(again), "the outcome shown", WAIT_S)
        status = await anyio.to_thread.run_sync(again.backend.server_status)
        assert status["demo"].pid == pid  # the same server process all along
        await pilot.press("q")


async def test_a_stdio_prompt_outlives_the_tui_and_is_answered_after(daemon: Path) -> None:
    """confirm_delete asks through a stdio server; the TUI that started it quits; the
    next one answers the prompt (the daemon kept the session) and the task completes."""
    first = build_app(Home(daemon))
    assert isinstance(first, ChitApp)
    async with first.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        first.submit(
            first.backend.call,
            "demo",
            "confirm_delete",
            {"filename": "old.txt"},
            "clean up",
            description="Start call",
        )
        await _by_events(first, lambda s: len(s.prompts) == 1, "the prompt")
        await pilot.press("q")

    again = build_app(Home(daemon))
    assert isinstance(again, ChitApp)
    async with again.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _confirm_in_inbox(pilot, again)
        await _by_events(
            again,
            lambda s: _receipt(again, "confirm_delete").state is LifecycleState.COMPLETED,
            "completed",
        )
        outcome = _outcome(again, "confirm_delete")
        assert outcome is not None and "Deleted old.txt" in str(outcome)
        await _by_events(again, lambda s: s.prompts == (), "no prompt left")
        await pilot.press("q")


async def test_the_tui_reconnects_when_the_daemon_goes_away(daemon: Path) -> None:
    """`chit daemon stop` under an open TUI: it says so, reaches a daemon again (started
    on demand, like any client) and goes on receiving its events."""
    app = build_app(Home(daemon))
    assert isinstance(app, ChitApp)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        first = daemon_pid(daemon)
        assert first is not None
        stopped = await anyio.to_thread.run_sync(
            lambda: chit("daemon", "stop", env=daemon_env(daemon))
        )
        assert stopped.code == 0, stopped.err
        with anyio.fail_after(WAIT_S):
            while not any("went away" in n.message for n in app._notifications):
                await anyio.sleep(0.05)
            while daemon_pid(daemon) in (None, first):  # the reconnect starts a new one
                await anyio.sleep(0.1)
        with anyio.fail_after(WAIT_S):
            while True:  # the new connection is up once a call goes through it
                try:
                    await anyio.to_thread.run_sync(
                        lambda: app.backend.call("demo", "greet", {"name": "Ada"}, "after")
                    )
                    break
                except Exception:
                    await anyio.sleep(0.2)
        await _by_events(
            app,
            lambda s: any(r.tool == "greet" and r.is_terminal for r in s.rows),
            "the call's receipt, told by the new daemon's events",
        )
        await pilot.press("q")
