"""Keys that fit the context: the footer shows what works here, nothing else acts."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets._footer import FooterKey

from chit.tui.app import ChitApp
from chit.tui.backend import Mode
from chit.tui.screens.confirm import ConfirmScreen
from chit.tui.screens.help import HelpScreen
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.screens.servers import ServersScreen
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, select, settle
from tests.tui.seed import rid

pytestmark = pytest.mark.anyio


def footer(app: ChitApp) -> dict[str, bool]:
    """Footer label → enabled, as shown on the active screen."""
    return {k.description: not k._disabled for k in app.screen.query(FooterKey)}


@pytest.mark.parametrize(
    ("receipt", "shown", "hidden"),
    [
        (1, {"Cancel", "Quit"}, {"Answer", "Accept", "Reject"}),  # working
        (2, {"Answer", "Cancel"}, {"Accept", "Reject"}),  # input required
        (3, {"Accept", "Reject"}, {"Answer", "Cancel"}),  # done, not judged
        (5, {"Accept", "Reject"}, {"Answer", "Cancel"}),  # cancelled
    ],
)
async def test_receipt_keys_follow_the_selected_state(
    app: ChitApp, fake: FakeSupervisor, receipt: int, shown: set[str], hidden: set[str]
) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(receipt))
        keys = footer(app)
        assert shown <= keys.keys()
        assert not hidden & keys.keys()
        for key in {"Answer": "r", "Accept": "a", "Reject": "x", "Cancel": "c"}.items():
            if key[0] in hidden:
                await pilot.press(key[1])
                await settle(pilot)
                assert len(app.screen_stack) == 2, f"{key[1]} acted where it does not apply"
        assert fake.calls == []


async def test_a_dialog_shows_its_own_keys_and_only_those_act(app: ChitApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(1))
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        keys = footer(app)
        assert "Back" in keys and "Help" in keys
        assert not {"Inbox", "New", "Servers", "Cancel", "Quit"} & keys.keys()
        for key in ("i", "n", "s", "c", "q"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen) and app.is_running


async def test_help_opens_from_a_dialog_and_lists_every_binding_with_its_id(
    app: ChitApp,
) -> None:
    async with app.run_test(size=(120, 60)) as pilot:
        await settle(pilot)
        await select(pilot, rid(2))
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("f1")  # the form's first field has the focus: "?" would type
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for ident in (
            "chit.pause",
            "chit.answer.send",
            "chit.new_call.start",
            "chit.undo",
            "chit.servers.probe",
            "chit.protocol_log",
            "chit.log.reload",
            "chit.filter",
        ):
            assert ident in text
        assert "ctrl+p" in text and "Command palette" in text
        await pilot.press("escape")
        await settle(pilot)
        assert type(app.screen).__name__ == "AnswerScreen"


async def test_the_palette_offers_only_what_works_here(app: ChitApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(3))
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"receipt: accept", "receipt: reject", "filter: edit"} <= titles
        assert "receipt: cancel" not in titles
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, ServersScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert not {t for t in titles if t.startswith(("receipt:", "filter:"))}
        await pilot.press("escape", "n")
        await settle(pilot)
        assert isinstance(app.screen, NewCallScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert titles <= {"view: theme", "help: keys"}


async def test_servers_screen_hides_receipt_keys(app: ChitApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        keys = footer(app)
        assert {"Connect", "Back", "Quit"} <= keys.keys()
        assert not {"Answer", "Accept", "Reject", "Cancel", "Servers"} & keys.keys()


async def test_readonly_greys_out_what_would_change_something(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", mode=Mode(readonly=True, banner="Read-only"))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(1))
        keys = footer(app)
        assert keys["Cancel"] is False and keys["Quit"] is True
        await pilot.press("c")
        await settle(pilot)
        assert len(app.screen_stack) == 2


async def test_at_80_columns_the_footer_keeps_quit_and_the_primary_actions(app: ChitApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, rid(3))
        keys = list(footer(app))
        assert keys[:4] == ["Accept", "Reject", "Quit", "Help"]
        width = sum(k.size.width for k in app.screen.query(FooterKey))
        assert width <= 80
