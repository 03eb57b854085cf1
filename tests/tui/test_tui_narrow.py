"""Readable at 80×24: column priorities, forms whose submit button and errors stay reachable."""

from __future__ import annotations

import pytest
from textual.widget import Widget
from textual.widgets import Button, Input, Select

from chit.tui.app import ChitApp
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.widgets.receipt_table import MIN_PURPOSE, layout
from tests.tui.conftest import FakeSupervisor
from tests.tui.helpers import screen_text, select, settle
from tests.tui.seed import rid

pytestmark = pytest.mark.anyio


def on_screen(app: ChitApp, widget: Widget) -> bool:
    """The widget is (at least partly) visible, not scrolled away or clipped."""
    region = widget.region
    if not region.area:
        return False
    visible = app.screen.find_widget(widget).visible_region
    return visible.area > 0 and app.screen.region.contains_region(visible)


def test_the_purpose_keeps_its_width_and_the_times_give_way() -> None:
    columns, purpose = layout(80)
    keys = [c.key for c in columns]
    assert purpose >= MIN_PURPOSE
    assert "id" not in keys and {"state", "verdict", "tool", "purpose"} <= set(keys)
    wide, purpose_wide = layout(200)
    assert [c.key for c in wide] == [
        "state",
        "verdict",
        "id",
        "tool",
        "purpose",
        "observed",
        "expires",
    ]
    assert purpose_wide > purpose


async def test_answer_form_at_80x24_keeps_send_and_every_error_reachable(
    app: ChitApp, fake: FakeSupervisor
) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, rid(2))
        await pilot.press("r")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AnswerScreen)
        await pilot.press("ctrl+s")
        await settle(pilot)
        for button in screen.query(Button):
            assert on_screen(app, button), button.label
        # Each field with a problem, in turn: focused, scrolled into view, message shown.
        for field_id, message in (("#field-0", "an answer is required"), ("#field-3", "required")):
            widget = screen.query_one(field_id)
            widget.focus()
            await settle(pilot)
            assert on_screen(app, widget)
            assert message in screen_text(app)
        screen.query_one("#field-0", Input).value = "ada@example.com"
        screen.query_one("#field-3", Select).value = "us"
        await pilot.click("#accept")
        await settle(pilot)
        assert fake.calls and fake.calls[0][3] == "accept"


async def test_new_call_form_at_80x24_shows_the_first_error_and_reaches_start(
    app: ChitApp, fake: FakeSupervisor
) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, NewCallScreen)
        screen.query_one("#server", Select).value = "demo"
        await settle(pilot)
        screen.query_one("#tool", Select).value = "multi_input"
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        first = screen.query_one("#arguments #field-0")
        assert app.focused is first and on_screen(app, first)
        assert "an answer is required" in screen_text(app)
        start = screen.query_one("#start", Button)
        start.focus()
        await settle(pilot)
        assert on_screen(app, start)
        assert fake.calls == []
