"""Never a dead app: Esc while background work runs, late results, failing workers, fuzz.

The new-call screen once crashed the app with ``NoMatches: No nodes match '#tool'``
when ``Esc`` closed it while it said "connecting…": the probe's answer arrived for a
screen that was gone. Every worker is now owned by its screen; these tests hold that.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Select

from chit.tui.app import ChitApp
from chit.tui.probe import Probe
from chit.tui.screens.detail import DetailScreen
from chit.tui.screens.inbox import InboxScreen
from chit.tui.screens.main import MainScreen
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.screens.protocol_log import ProtocolLogScreen
from chit.tui.screens.servers import ServersScreen
from tests.tui.conftest import DEMO_PROBE, FakeSupervisor, TestBackend, make_app
from tests.tui.helpers import settle
from tests.tui.test_tui_protocol_log import messages

pytestmark = pytest.mark.anyio


class Gate:
    """Holds background calls until the test lets them through."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.waiting = 0

    def wait(self) -> None:
        self.waiting += 1
        try:
            # Bounded: a test that forgets to open the gate fails, it does not hang.
            assert self.event.wait(30), "the gate was never opened"
        finally:
            self.waiting -= 1


class GatedBackend(TestBackend):
    """Server listings and probes wait at a gate (a slow server, held on purpose)."""

    __test__ = False
    gate = Gate()

    def servers(self) -> list[Any]:
        self.gate.wait()
        return super().servers()

    def probe(self, name: str) -> Probe:
        self.gate.wait()
        return DEMO_PROBE

    def server_status(self) -> dict[str, Any]:
        self.gate.wait()
        return {}

    def protocol_log(self, server: str, limit: int = 200) -> list[Any]:
        self.gate.wait()
        return messages(server)


@pytest.fixture
def gate() -> Gate:
    GatedBackend.gate = Gate()
    return GatedBackend.gate


async def _until(pilot: Pilot[None], done: Any) -> None:
    for _ in range(200):
        if done():
            return
        await pilot.pause()
    raise AssertionError("condition never held")


async def test_esc_while_the_new_call_screen_connects_does_not_crash(
    tmp_path: Path, gate: Gate
) -> None:
    """The regression: choose a server, Esc while "connecting…", the answer comes late."""
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor(), backend=GatedBackend)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, NewCallScreen)
        gate.event.set()  # the server list arrives ...
        await _until(pilot, lambda: screen.query_one("#server", Select)._options[1:])
        gate.event.clear()  # ... the probe will hang
        screen.query_one("#server", Select).value = "demo"
        await _until(pilot, lambda: gate.waiting == 1)
        assert "connecting to demo" in str(screen.query_one("#tool", Select).prompt)
        await pilot.press("escape")
        await _until(pilot, lambda: isinstance(app.screen, MainScreen))
        gate.event.set()  # the late answer, for a screen that is gone
        await _until(pilot, lambda: gate.waiting == 0)
        await settle(pilot)
        assert app.is_running and app._exception is None
        assert isinstance(app.screen, MainScreen)
        assert not [n for n in app._notifications if n.severity == "error"]


async def test_a_late_result_for_a_closed_servers_screen_is_dropped(
    tmp_path: Path, gate: Gate
) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor(), backend=GatedBackend)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        assert isinstance(app.screen, ServersScreen)
        await _until(pilot, lambda: gate.waiting == 2)  # the listing and the sessions
        await pilot.press("escape")
        gate.event.set()
        await _until(pilot, lambda: gate.waiting == 0)
        await settle(pilot)
        assert app.is_running and app._exception is None


class BrokenBackend(TestBackend):
    """A probe that fails the way a bug does (not a ChitError)."""

    __test__ = False

    def probe(self, name: str) -> Probe:
        raise KeyError("tools")


async def test_an_unexpected_worker_error_is_a_toast_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor(), backend=BrokenBackend)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        with caplog.at_level(logging.ERROR, logger="chit.tui"):
            await pilot.press("p")
            await settle(pilot)
        toasts = [n for n in app._notifications if n.severity == "error"]
        assert [t.title for t in toasts] == ["Connect to demo failed"]
        assert "KeyError" not in toasts[0].message  # words, not a class name
        assert any("Connect to demo failed" in r.getMessage() for r in caplog.records)
        assert app.is_running and isinstance(app.screen, ServersScreen)


async def test_a_second_press_goes_back_to_the_open_screen(app: ChitApp) -> None:
    """s → i → s: still one servers screen, and the inbox above it is closed."""
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for key in ("s", "i", "s", "i", "i", "s"):
            await pilot.press(key)
            await settle(pilot)
        kinds = Counter(type(s).__name__ for s in app.screen_stack)
        assert max(kinds.values()) == 1, kinds
        assert isinstance(app.screen, ServersScreen)


async def test_every_screen_answers_the_footer_before_it_is_mounted(app: ChitApp) -> None:
    """The footer asks which keys work the moment a screen is pushed, before ``on_mount``.

    A demo in a loaded CI run died there: ``i`` pushed the inbox, a key press asked
    ``check_action`` and the inbox had no ``items`` yet (they were set in ``on_mount``).
    """
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screens = (
            InboxScreen(),
            ServersScreen(),
            MainScreen(),
            DetailScreen("no-such-receipt"),
            ProtocolLogScreen("demo"),
            NewCallScreen(),
        )
        actions = [b.action for b in app._bindings_of_app()]
        for screen in screens:
            answers = {action: app.allows(action, screen) for action in actions}
            assert set(answers) == set(actions)
        # Nothing is selected on a screen that has shown nothing yet.
        assert InboxScreen().selected_receipt() is None
        assert not InboxScreen().has_prompt()
        assert ServersScreen().selected_server() is None


FUZZ_KEYS = (
    *("i", "s", "n", "r", "c", "a", "x", "u", "z", "p", "l", "g", "y", "1", "2"),
    *("slash", "escape", "escape", "enter", "tab", "shift+tab", "up", "down", "space"),
    *("question_mark", "ctrl+s", "ctrl+p", "home", "end", "pagedown", "backspace"),
)
"""Every key chit binds and the ones forms use; never q, ctrl+q or ctrl+c (they quit)."""


def _invariant(app: ChitApp) -> None:
    assert app.is_running and app._exception is None
    kinds = Counter(type(s) for s in app.screen_stack)
    assert max(kinds.values()) == 1, kinds


KEYS_PER_RUN = 500
"""Seeded keys per run: four runs make the 2,000 of CI (``CHIT_NIGHTLY=1``: ten times more)."""


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_random_keys_never_kill_the_app(tmp_path: Path, gate: Gate, seed: int) -> None:
    """500 seeded keys per run (2,000 in all), typed in bursts of one to six keys (a
    person hammering the keyboard: a burst lands before the screen has caught up);
    background work is held and released at random moments, so Esc and every other key
    land while workers run. After every burst: alive, one screen of each kind at most."""
    rng = random.Random(seed)
    fake = FakeSupervisor()
    app = make_app(tmp_path / "home", supervisor=fake, backend=GatedBackend)
    budget = KEYS_PER_RUN * (10 if os.environ.get("CHIT_NIGHTLY") == "1" else 1)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        pressed = 0
        while pressed < budget:
            if rng.random() < 0.3:
                gate.event.set() if not gate.event.is_set() else gate.event.clear()
            burst = rng.choices(FUZZ_KEYS, k=min(rng.randint(1, 6), budget - pressed))
            await pilot.press(*burst)
            pressed += len(burst)
            _invariant(app)
        gate.event.set()
        await _until(pilot, lambda: gate.waiting == 0)
        await settle(pilot)
        _invariant(app)
