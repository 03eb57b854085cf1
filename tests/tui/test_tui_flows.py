"""Pilot tests: every flow of the TUI on a seeded home with a recording Supervisor."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Select

from chit.receipts import AcceptanceState, LifecycleState
from chit.runtime.events import ReceiptChanged
from chit.tui.app import ChitApp
from chit.tui.backend import Mode
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.confirm import ConfirmScreen, ReasonScreen
from chit.tui.screens.detail import DetailScreen
from chit.tui.screens.help import HelpScreen
from chit.tui.screens.inbox import InboxScreen
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.screens.servers import ServersScreen
from chit.tui.screens.verdict import AcceptScreen
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, select, settle, stored, until
from tests.tui.seed import rid

pytestmark = pytest.mark.anyio


async def test_main_screen_groups_receipts_by_work_record_in_attention_order(
    app: ChitApp,
) -> None:
    """Within a record: input, near expiry, not judged; records by their most urgent row."""
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        keys = app.screen.query_one(ReceiptTable)._keys
        assert keys == [
            "w:W-report",
            f"r:{rid(2)}",  # input required
            f"r:{rid(1)}",  # 250 s to its TTL: near expiry
            f"r:{rid(3)}",  # done, not judged
            "w:",  # no work record: its most urgent row is a prompt too
            f"r:{rid(7)}",
            f"r:{rid(5)}",  # cancelled, not judged
            f"r:{rid(6)}",  # working
            "w:W-cleanup",
            f"r:{rid(4)}",
        ]
        assert app.snapshot.total == 7
        assert len(app.snapshot.prompts) == 2


async def test_filter_by_state_server_and_text(app: ChitApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"state:failed")
        await settle(pilot)
        assert [r.state for r in app.snapshot.rows] == [LifecycleState.FAILED]
        app.screen.query_one("#filter", Input).value = "server:reports"
        await settle(pilot)
        assert [r.receipt_id for r in app.snapshot.rows] == [rid(6)]
        app.screen.query_one("#filter", Input).value = "simulation"
        await settle(pilot)
        assert [r.receipt_id for r in app.snapshot.rows] == [rid(5)]
        await pilot.press("escape")
        await settle(pilot)
        assert app.query_text == ""
        assert len(app.snapshot.rows) == 7


async def test_open_detail_shows_timeline_outcome_and_decision(app: ChitApp) -> None:
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(3))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        text = screen_text(app)
        assert "Hello, Ada!" in text
        assert "Timeline (2)" in text
        assert "evaluate" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_detail_shows_cancellation_posture_with_both_timestamps(app: ChitApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(5))
        text = screen_text(app)
        assert "requested" in text and "11:54:30Z" in text
        assert "observed" in text and "→ cancelled" in text


async def test_answer_prompt_with_validation(app: ChitApp, fake: FakeSupervisor) -> None:
    async with app.run_test(size=(120, 48)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        await settle(pilot)
        assert isinstance(app.screen, InboxScreen)
        await pilot.press("down", "enter")  # oldest first: the URL prompt, then q1
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AnswerScreen)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "required" in screen_text(app)
        assert fake.calls == []
        screen.query_one("#field-0", Input).value = "not-an-address"
        screen.query_one("#field-1", Input).value = "9"
        await pilot.press("ctrl+s")
        await settle(pilot)
        text = screen_text(app)
        assert "not a valid email address" in text
        assert "must be at most 5" in text
        screen.query_one("#field-0", Input).value = "ada@example.com"
        screen.query_one("#field-1", Input).value = "2"
        screen.query_one("#field-3", Select).value = "eu"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert fake.calls == [
            (
                "answer",
                rid(2),
                "q1",
                "accept",
                {"email": "ada@example.com", "copies": 2, "urgent": False, "region": "eu"},
            )
        ]
        assert not isinstance(app.screen, AnswerScreen)


async def test_url_mode_prompt_shows_the_url_and_declines(
    app: ChitApp, fake: FakeSupervisor
) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(7))
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, AnswerScreen)
        assert "https://example.com/approve/42" in screen_text(app)
        await pilot.click("#decline")
        await settle(pilot)
        assert fake.calls == [("answer", rid(7), "u1", "decline", None)]


async def test_cancel_asks_first_and_keeps_running_on_no(
    app: ChitApp, fake: FakeSupervisor
) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(1))
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # the focused button is "Keep running"
        await settle(pilot)
        assert fake.calls == []
        await pilot.press("c")
        await settle(pilot)
        await pilot.click("#yes")
        await settle(pilot)
        assert fake.calls == [("cancel", rid(1))]


async def test_accept_and_reject_with_reason(app: ChitApp, tmp_path: Path) -> None:
    # Every step waits for its own event (a dialog up, a verdict stored): a loaded machine
    # can outlast settle()'s bound, and the next key would go to the screen before.
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(3))
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AcceptScreen), "the accept dialog", 120)
        # The preview comes first.
        await until(pilot, lambda: "Hello, Ada!" in screen_text(app), "the preview", 120)
        await pilot.press("enter")  # a success: "Accept" has the focus
        await until(pilot, lambda: _verdict(app, 3) is AcceptanceState.ACCEPTED, "accepted", 120)
        await until(pilot, lambda: not isinstance(app.screen, AcceptScreen), "dialog gone", 120)
        await settle(pilot)
        await select(pilot, rid(4))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason dialog", 120)
        await pilot.press("enter")
        await until(pilot, lambda: "A reason is required" in screen_text(app), "refusal", 120)
        await pilot.press(*"wrong branch")
        await pilot.press("enter")
        await until(pilot, lambda: _verdict(app, 4) is AcceptanceState.REJECTED, "rejected", 120)
    rejected = stored(app, rid(4)).acceptance
    assert rejected.state is AcceptanceState.REJECTED and rejected.why == "wrong branch"


def _verdict(app: ChitApp, n: int) -> AcceptanceState:
    return stored(app, rid(n)).acceptance.state


async def test_new_call_server_tool_form_purpose(app: ChitApp, fake: FakeSupervisor) -> None:
    async with app.run_test(size=(120, 48)) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, NewCallScreen)
        screen.query_one("#server", Select).value = "demo"
        await settle(pilot)
        screen.query_one("#tool", Select).value = "echo"
        await settle(pilot)
        assert "Not a task" in screen_text(app)
        screen.query_one("#tool", Select).value = "greet"
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert fake.calls == []  # name is required
        screen.query_one("#field-0", Input).value = "Ada"
        screen.query_one("#purpose", Input).value = "welcome Ada"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert fake.calls == [("call", "demo", "greet", {"name": "Ada"}, "welcome Ada", None)]


async def test_servers_screen_shows_protocol_and_task_support(app: ChitApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, ServersScreen)
        await pilot.press("p")
        await settle(pilot)
        text = screen_text(app)
        assert "protocol 2025-11-25" in text
        assert "does not support tasks" in text


async def test_help_lists_keymap_ids(app: ChitApp) -> None:
    async with app.run_test(size=(120, 48)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for binding_id in ("chit.filter", "chit.cancel", "chit.inbox", "chit.new_call"):
            assert binding_id in text


async def test_keymap_remaps_a_binding(tmp_path: Path, fake: FakeSupervisor) -> None:
    app = make_app(tmp_path / "home", supervisor=fake)
    app.set_keymap({"chit.cancel": "ctrl+k"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select(pilot, rid(1))
        await pilot.press("ctrl+k")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)


async def test_readonly_refuses_actions_with_a_banner(tmp_path: Path, fake: FakeSupervisor) -> None:
    mode = Mode(readonly=True, banner="Key store unavailable: no keyring. Read-only until then.")
    app = make_app(tmp_path / "home", mode=mode, supervisor=fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "Key store unavailable" in screen_text(app)
        await select(pilot, rid(1))
        for key in ("c", "a", "r", "n"):
            await pilot.press(key)
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen | AnswerScreen | NewCallScreen)
        assert fake.calls == []


async def test_worker_error_becomes_a_toast_not_a_crash(
    tmp_path: Path, fake: FakeSupervisor
) -> None:
    from chit.errors import ChitError

    def broken(receipt_id: str) -> None:
        raise ChitError("server 'demo' is unreachable")

    fake.cancel = broken  # type: ignore[method-assign]
    app = make_app(tmp_path / "home", supervisor=fake)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await select(pilot, rid(1))
        await pilot.press("c")
        await settle(pilot)
        await pilot.click("#yes")
        await settle(pilot)
        messages = [n.message for n in app._notifications]
        assert "server 'demo' is unreachable" in messages
        assert app.is_running


async def test_supervisor_events_trigger_one_coalesced_reload(
    app: ChitApp, fake: FakeSupervisor
) -> None:
    loads: list[int] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        original = app.publish

        def counting(snapshot: object) -> None:
            loads.append(1)
            original(snapshot)  # type: ignore[arg-type]

        app.publish = counting  # type: ignore[method-assign]
        receipt = app.model.receipts[rid(1)]
        for n in range(50):
            changed = receipt.model_copy(update={"version": receipt.version + n + 1})
            fake.subscribers[0](ReceiptChanged(changed, receipt, ("status_message",)))
        await settle(pilot)
        assert 1 <= len(loads) <= 3
        assert app.model.receipts[rid(1)].version == receipt.version + 50


async def test_restart_keeps_receipts_and_prompts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = make_app(home, supervisor=FakeSupervisor())
    async with first.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("q")
    from chit.home import Home
    from chit.tui.config import TuiSettings
    from tests.tui.conftest import TestBackend

    again = ChitApp(
        TestBackend(Home(home), Mode(), FakeSupervisor()), TuiSettings(bell=False), tick=None
    )
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert again.snapshot.total == 7
        assert {p.request.key for p in again.snapshot.prompts} == {"q1", "u1"}
