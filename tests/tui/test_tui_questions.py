"""Agents' ``work_ask`` questions in the inbox: shown beside prompts, answered with the form."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Checkbox, DataTable, Input

from chit.sidecar.db import open_sidecar_db
from chit.sidecar.decisions import get
from chit.tui.app import ChitApp
from chit.tui.backend import Mode
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.inbox import InboxScreen
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, settle
from tests.tui.seed import seed_question

pytestmark = pytest.mark.anyio


def _decision(app: ChitApp, decision_id: str) -> tuple[str, object]:
    db = open_sidecar_db(app.backend.home.sidecar_db_path)
    try:
        found = get(db, decision_id)
    finally:
        db.close()
    assert found is not None
    return found.state, found.answer


async def _open_question(app: ChitApp, pilot: object) -> AnswerScreen:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await settle(pilot)
    await pilot.press("i")
    await settle(pilot)
    assert isinstance(app.screen, InboxScreen)
    table = app.screen.query_one("#prompts", DataTable)
    keys = [row.value for row in table.rows]
    table.move_cursor(row=keys.index("q:dq_seeded"), animate=False)
    await pilot.press("enter")
    await settle(pilot)
    assert isinstance(app.screen, AnswerScreen)
    return app.screen


async def test_question_appears_in_the_inbox_and_answering_decides_it(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_question(app.backend.home)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert [q.decision_id for q in app.snapshot.questions] == ["dq_seeded"]
        assert app.snapshot.questions[0].work_label == "Quarterly report"
        assert "inbox 3 (i)" in screen_text(app)
        screen = await _open_question(app, pilot)
        text = screen_text(app)
        assert "Agent question" in text and "Quarterly report" in text
        assert "Send the Q1 report to the board now?" in text
        screen.query_one("#field-1", Input).value = "x" * 41  # maxLength 40: the shared rule
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "must be at most 40 characters" in screen_text(app)
        assert _decision(app, "dq_seeded")[0] == "pending"
        screen.query_one("#field-0", Checkbox).value = True
        screen.query_one("#field-1", Input).value = "go ahead"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert not isinstance(app.screen, AnswerScreen)
        assert _decision(app, "dq_seeded") == ("answered", {"approve": True, "note": "go ahead"})
        assert app.snapshot.questions == ()


async def test_declining_a_question_withdraws_it(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_question(app.backend.home)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_question(app, pilot)
        await pilot.click("#decline")
        await settle(pilot)
        assert _decision(app, "dq_seeded") == ("cancelled", None)
        assert app.snapshot.questions == ()


async def test_question_without_schema_takes_one_line_of_text(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_question(app.backend.home, schema=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open_question(app, pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "an answer is required" in screen_text(app)
        screen.query_one("#field-0", Input).value = "ship it"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert _decision(app, "dq_seeded") == ("answered", "ship it")


async def test_readonly_cannot_answer_a_question(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", mode=Mode(readonly=True, banner="Read-only"))
    seed_question(app.backend.home)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("i")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, AnswerScreen)
        assert _decision(app, "dq_seeded")[0] == "pending"


async def test_home_without_sidecar_store_has_no_questions(tmp_path: Path) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.snapshot.questions == ()
    assert not app.backend.home.sidecar_db_path.exists()  # reading must not create it
