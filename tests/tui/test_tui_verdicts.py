"""Verdicts with care: the outcome first, an error asked twice, undo, honest buttons."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from textual.widgets import Button, Input

from chit import clock
from chit.receipts import AcceptanceState
from chit.store import Store
from chit.tui.app import ChitApp
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.confirm import ConfirmScreen
from chit.tui.screens.verdict import AcceptScreen
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, select, settle
from tests.tui.seed import NOW, rid, seed_question
from tests.tui.test_tui_questions import _decision, _open_question

pytestmark = pytest.mark.anyio


def _acceptance(app: ChitApp, n: int) -> AcceptanceState:
    with Store.open(app.backend.home) as store:
        return store.receipts.require(rid(n)).acceptance.state


def _verdict_cell(app: ChitApp, n: int) -> str:
    table = app.screen.query_one(ReceiptTable)
    return table.cell(f"r:{rid(n)}", "verdict").plain


async def test_accepting_an_error_result_asks_twice(app: ChitApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(4))  # failed: disk quota exceeded
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, AcceptScreen)
        text = screen_text(app)
        assert "not a success" in text and "disk quota exceeded" in text
        assert app.focused is not None and app.focused.id == "no"  # Enter would go back
        await pilot.click("#yes")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)  # the second question
        assert "error, not a result" in screen_text(app)
        await pilot.press("enter")  # "Back" has the focus
        await settle(pilot)
        assert _acceptance(app, 4) is AcceptanceState.PENDING
        await pilot.press("a")
        await settle(pilot)
        await pilot.click("#yes")
        await settle(pilot)
        await pilot.click("#yes")
        await settle(pilot)
        assert _acceptance(app, 4) is AcceptanceState.ACCEPTED
        assert _verdict_cell(app, 4) == "✓ accepted"


async def test_a_success_is_accepted_after_its_preview_and_can_be_undone(app: ChitApp) -> None:
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await select(pilot, rid(3))
        assert _verdict_cell(app, 3) == "• to judge"
        await pilot.press("a")
        await settle(pilot)
        assert "Hello, Ada!" in screen_text(app) and "not isError" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert _acceptance(app, 3) is AcceptanceState.ACCEPTED
        assert _verdict_cell(app, 3) == "✓ accepted"
        assert app.screen.query_one(ReceiptTable).cursor_key == f"r:{rid(3)}"
        await pilot.press("u")
        await settle(pilot)
        assert _acceptance(app, 3) is AcceptanceState.PENDING
        assert _verdict_cell(app, 3) == "• to judge"


async def test_undo_is_offered_only_for_a_short_time(app: ChitApp) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(4))
        await pilot.press("x")
        await settle(pilot)
        await pilot.press(*"wrong disk")
        await pilot.press("enter")
        await settle(pilot)
        assert _acceptance(app, 4) is AcceptanceState.REJECTED
        assert app.can_undo()
        clock.freeze(NOW + timedelta(seconds=20))
        app.refresh_bindings()
        await settle(pilot)
        assert not app.can_undo()
        await pilot.press("u")
        await settle(pilot)
        assert _acceptance(app, 4) is AcceptanceState.REJECTED


async def test_answer_buttons_say_what_they_send(app: ChitApp, fake: FakeSupervisor) -> None:
    async with app.run_test(size=(120, 48)) as pilot:
        await settle(pilot)
        await select(pilot, rid(2))
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AnswerScreen)
        labels = [str(b.label) for b in screen.query(Button)]
        assert labels == ["Send", "Decline", "Cancel request"]
        assert "Close (sends nothing)" in screen_text(app)
        await pilot.press("escape")  # closes, sends nothing
        await settle(pilot)
        assert not isinstance(app.screen, AnswerScreen) and fake.calls == []
        await pilot.press("r")
        await settle(pilot)
        await pilot.click("#cancel")
        await settle(pilot)
        assert fake.calls == [("answer", rid(2), "q1", "cancel", None)]


async def test_enter_sends_a_valid_one_field_form(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_question(app.backend.home, schema=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open_question(app, pilot)
        labels = [str(b.label) for b in screen.query(Button)]
        assert labels == ["Send", "Decline"]  # a question has no separate "cancel"
        await pilot.press("enter")  # empty: invalid, nothing sent
        await settle(pilot)
        assert isinstance(app.screen, AnswerScreen)
        assert "an answer is required" in screen_text(app)
        screen.query_one("#field-0", Input).value = "ship it"
        screen.query_one("#field-0", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert _decision(app, "dq_seeded") == ("answered", "ship it")
