"""The list holds still: attention order, a cursor that keeps its receipt, pause, focus."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from chit.receipts import InputRequest, LifecycleState, Receipt
from chit.runtime.events import ReceiptChanged
from chit.tui.app import ChitApp
from chit.tui.index import Attention, Entry, ReceiptIndex
from chit.tui.screens.new_call import NewCallScreen
from chit.tui.view import parse_filter
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import select, settle
from tests.tui.seed import NOW, rid, seed_many

pytestmark = pytest.mark.anyio


def _push(fake: FakeSupervisor, receipt: Receipt, **update: object) -> Receipt:
    after = receipt.model_copy(update={**update, "version": receipt.version + 1})
    for subscriber in fake.subscribers:
        subscriber(ReceiptChanged(after, receipt, tuple(update)))
    return after


async def test_focus_is_on_the_list_from_the_first_frame(app: ChitApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ReceiptTable)
        assert app.focused is table
        start = table.cursor_row
        await pilot.press("down", "j")
        assert table.cursor_row == start + 2
        await pilot.press("k")
        assert table.cursor_row == start + 1


async def test_empty_home_keys_never_reach_the_hidden_filter(tmp_path: Path) -> None:
    """s → Esc → n opens a new call (it once typed "n" into the hidden filter)."""
    app = make_app(tmp_path / "home", data=False, supervisor=FakeSupervisor())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for key in ("s", "escape", "n"):
            await pilot.press(key)
            await settle(pilot)
        assert isinstance(app.screen, NewCallScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert app.query_text == ""


async def test_order_holds_across_50_polls_and_the_cursor_keeps_its_receipt(
    tmp_path: Path, fake: FakeSupervisor
) -> None:
    """Other receipts change state on every poll, above and below the cursor; the person
    never moves: the highlighted receipt stays highlighted, at the same height."""
    app = make_app(tmp_path / "home", data=False, supervisor=fake)
    ids = seed_many(app.backend.home, 60)
    rng = random.Random(7)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ReceiptTable)
        chosen = ids[30]
        await select(pilot, chosen)
        table.scroll_to(y=table.cursor_row - 10, animate=False, immediate=True)
        await settle(pilot)
        height = table.cursor_row - round(table.scroll_y)
        assert height == 10
        for poll in range(50):
            receipt = app.model.receipts[rng.choice([i for i in ids if i != chosen])]
            if receipt.state is LifecycleState.WORKING:
                request = InputRequest(key=f"k{poll}", message="ok?", received_at=NOW)
                _push(fake, receipt, state=LifecycleState.INPUT_REQUIRED, input_requests=(request,))
            else:
                _push(fake, receipt, state=LifecycleState.WORKING, input_requests=())
            await settle(pilot)
            assert table.cursor_key == f"r:{chosen}", f"poll {poll}"
            assert table.cursor_row - round(table.scroll_y) == height, f"poll {poll}"


async def test_pause_freezes_the_list_until_resumed(app: ChitApp, fake: FakeSupervisor) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("z")
        await settle(pilot)
        keys = list(app.screen.query_one(ReceiptTable)._keys)
        working = app.model.receipts[rid(6)]
        _push(fake, working, state=LifecycleState.INPUT_REQUIRED)
        await settle(pilot)
        assert app.screen.query_one(ReceiptTable)._keys == keys
        assert "PAUSED" in str(app.screen.query_one("#status").render())
        await pilot.press("z")
        await settle(pilot)
        new_keys = app.screen.query_one(ReceiptTable)._keys
        assert new_keys != keys
        assert new_keys.index(f"r:{rid(6)}") < keys.index(f"r:{rid(6)}")


def _entry(n: int, state: str, **kw: object) -> Entry:
    fields: dict[str, object] = {
        "receipt_id": rid(n),
        "server": "demo",
        "tool": "t",
        "purpose": f"job {n}",
        "work_ref": None,
        "state": state,
        "retrieval": "fresh",
        "acceptance": "pending",
        "accepted_at": f"2026-03-01T11:{n:02d}:00.000Z",
        "expires_at": None,
        "version": 1,
        "status_at": f"2026-03-01T11:{n:02d}:00.000Z",
    }
    fields.update(kw)
    return Entry.from_row(**fields)  # type: ignore[arg-type]


def test_attention_groups_in_order() -> None:
    soon = "2026-03-01T12:03:00.000Z"
    index = ReceiptIndex(
        [
            _entry(1, "completed", acceptance="accepted"),
            _entry(2, "working"),
            _entry(3, "completed"),
            _entry(4, "working", retrieval="unreachable"),
            _entry(5, "working", expires_at=soon),
            _entry(6, "input_required"),
        ],
        now=NOW,
    )
    ranks = [e.rank for e in index.ordered()]
    assert ranks == sorted(ranks) == list(Attention)[::-1][::-1]
    assert [e.receipt_id for e in index.ordered()] == [rid(n) for n in (6, 5, 4, 3, 2, 1)]


def test_within_a_group_the_acceptance_time_decides_and_changes_move_one_entry() -> None:
    index = ReceiptIndex([_entry(n, "working") for n in range(1, 6)], now=NOW)
    assert [e.receipt_id for e in index.ordered()] == [rid(n) for n in range(1, 6)]
    assert index.put(_entry(3, "input_required", version=2))
    assert [e.receipt_id for e in index.ordered()] == [rid(n) for n in (3, 1, 2, 4, 5)]
    assert not index.put(_entry(3, "working", version=1))  # an older version: ignored
    assert not index.put(_entry(1, "working", version=2))  # same place: nothing moves
    assert index.counts()[LifecycleState.INPUT_REQUIRED] == 1


def test_near_expiry_arrives_with_the_clock() -> None:
    later = "2026-03-01T12:20:00.000Z"
    index = ReceiptIndex([_entry(1, "working"), _entry(2, "working", expires_at=later)], now=NOW)
    assert [e.receipt_id for e in index.ordered()] == [rid(1), rid(2)]
    assert index.advance(NOW + timedelta(minutes=10)) == []
    assert index.advance(NOW + timedelta(minutes=16)) == [rid(2)]
    assert [e.receipt_id for e in index.ordered()] == [rid(2), rid(1)]


def test_the_filter_walks_the_order_and_stops_at_a_page() -> None:
    index = ReceiptIndex(
        [_entry(n, "working" if n % 2 else "failed") for n in range(1, 40)], now=NOW
    )
    window, more = index.window(parse_filter("state:failed job"), 5)
    assert [e.receipt_id for e in window] == [rid(n) for n in (2, 4, 6, 8, 10)] and more
    window, more = index.window(parse_filter("JOB 3"), 100)
    assert {e.receipt_id for e in window} == {
        rid(n) for n in (3, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39)
    }
    assert not more


def test_unreachable_servers_are_counted_per_server() -> None:
    index = ReceiptIndex(
        [
            _entry(1, "working", retrieval="unreachable"),
            _entry(2, "completed", retrieval="unreachable"),
            _entry(3, "working", server="other"),
        ],
        now=NOW,
    )
    assert index.unreachable() == {"demo": frozenset({rid(1)})}
    index.put(_entry(1, "working", version=2))
    assert index.unreachable() == {}


def test_a_verdict_moves_a_receipt_to_judged() -> None:
    base = _entry(1, "completed")
    index = ReceiptIndex([base, _entry(2, "working")], now=NOW)
    assert [e.rank for e in index.ordered()] == [Attention.UNJUDGED, Attention.WORKING]
    index.put(_entry(1, "completed", acceptance="accepted", version=2))
    assert [e.rank for e in index.ordered()] == [Attention.WORKING, Attention.JUDGED]
