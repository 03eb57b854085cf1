"""Calm: a clock tick that changes nothing on screen publishes (and repaints) nothing.

The clock is frozen and moved by hand (``chit.clock``); the app's tick is called
directly. A published snapshot is a new object, so "nothing published" is "the same
snapshot object as before".
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.style import Style
from textual.coordinate import Coordinate
from textual.geometry import Region

from chit import clock
from chit.receipts import LifecycleState, RetrievalCondition
from chit.store import Store
from chit.tui.app import ChitApp
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, settle, stored
from tests.tui.seed import NOW, _receipt

pytestmark = pytest.mark.anyio


def _app(root: Path, observed_ago: timedelta) -> ChitApp:
    """A home with three working receipts observed ``observed_ago`` before NOW."""
    app = make_app(root, data=False, supervisor=FakeSupervisor())
    with Store.open(app.backend.home) as store:
        for n in range(1, 4):
            at = NOW - observed_ago - timedelta(seconds=n)
            r = _receipt(n, status_at=at, accepted_at=at, state=LifecycleState.WORKING)
            store.receipts.insert(r, None, None, [])
    return app


async def test_ticks_that_change_no_text_publish_nothing(tmp_path: Path) -> None:
    app = _app(tmp_path / "home", timedelta(minutes=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        shown = app.snapshot
        assert "10m" in screen_text(app)  # the narrow "seen" column beside the pane
        for second in range(1, 15):  # "10m" stays "10m"
            clock.freeze(NOW + timedelta(seconds=second))
            app.tick()
            await settle(pilot)
            assert app.snapshot is shown, f"published at +{second} s"
        clock.freeze(NOW + timedelta(seconds=61))  # a new minute: every row reads 11m
        app.tick()
        await settle(pilot)
        assert app.snapshot is not shown
        assert "11m" in screen_text(app) and "10m" not in screen_text(app)


async def test_a_text_that_moves_by_the_second_is_published_every_tick(tmp_path: Path) -> None:
    app = _app(tmp_path / "home", timedelta(seconds=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert "11s" in screen_text(app)
        for second in (1, 2):
            shown = app.snapshot
            clock.freeze(NOW + timedelta(seconds=second))
            app.tick()
            await settle(pilot)
            assert app.snapshot is not shown
            assert f"{11 + second}s" in screen_text(app)


async def test_the_footer_is_refreshed_only_when_the_keys_change(tmp_path: Path) -> None:
    app = _app(tmp_path / "home", timedelta(seconds=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        refreshed = 0
        original = app.refresh_bindings

        def counting() -> None:
            nonlocal refreshed
            refreshed += 1
            original()

        app.refresh_bindings = counting  # type: ignore[method-assign]
        for second in (1, 2, 3):  # three publishes, the same keys work
            clock.freeze(NOW + timedelta(seconds=second))
            app.tick()
            await settle(pilot)
        assert refreshed == 0
        app.set_paused(True)  # not a key change (z's own screen refreshes it)
        await pilot.press("s")  # another screen: other keys
        await settle(pilot)
        assert refreshed >= 1


async def test_an_unreachable_server_is_in_the_status_line_and_toasted_once(
    tmp_path: Path,
) -> None:
    """The transport's "unexpected failure: ExceptionGroup" reaches the person in words."""
    app = _app(tmp_path / "home", timedelta(minutes=10))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        for n, row in enumerate(app.snapshot.rows):
            receipt = stored(app, row.receipt_id)
            down = receipt.model_copy(
                update={
                    "retrieval": RetrievalCondition.UNREACHABLE,
                    "retrieval_error": "unexpected failure: ExceptionGroup",
                    "version": receipt.version + 1 + n,
                }
            )
            app.apply_receipt(down)
            await settle(pilot)
        toasts = [m.message for m in app._notifications if m.title == "Server unreachable"]
        assert toasts == [
            "demo: it could not be reached. chit keeps trying (1 task(s) wait on it)."
        ]
        text = screen_text(app)
        assert "demo unreachable" in text
        assert "ExceptionGroup" not in text + "".join(m.message for m in app._notifications)


async def test_a_clock_tick_draws_only_the_cells_that_moved(tmp_path: Path) -> None:
    """A tick that moves "12 s ago" renders those cells again, not the table or the screen.

    Through ``DataTable.update_cell`` (which counts an update: every render cache key
    changes) each tick rendered every visible cell of the table again, and the app's
    snapshot, a repainting ``reactive``, redrew the whole screen: ~10 % of a core idle.
    A cell rendered is a new value in the table's cell cache.
    """
    app = _app(tmp_path / "home", timedelta(seconds=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ReceiptTable)
        cache = table._cell_render_cache
        compositor = app.screen._compositor
        full, full_updates = compositor.render_full_update, 0

        def counting_full(*args: Any, **kwargs: Any) -> Any:
            nonlocal full_updates
            full_updates += 1
            return full(*args, **kwargs)

        assert "11s" in screen_text(app)
        rendered: list[str] = []
        for second in (1, 2, 3):
            clock.freeze(NOW + timedelta(seconds=second))
            before = {k: cache.get(k) for k in cache.keys()}  # noqa: SIM118 - not a dict
            compositor.render_full_update = counting_full  # type: ignore[method-assign]
            app.tick()
            await settle(pilot)
            await pilot.pause()
            compositor.render_full_update = full  # type: ignore[method-assign]
            rendered += [
                str(k[1].value)
                for k in cache.keys()  # noqa: SIM118 - an LRUCache, not a dict
                if cache.get(k) is not before.get(k) and k[0].value  # new, and not the header
            ]
            shown = screen_text(app)  # a screenshot is a full render of its own
            assert f"{11 + second}s" in shown and f"{10 + second}s" not in shown
        assert full_updates == 0
        # Three rows, one moving cell each ("seen"; their expiry has no TTL), per tick.
        assert sorted(rendered) == ["observed"] * 9, rendered


def _cells(table: ReceiptTable) -> list[list[tuple[str, Style | None]]]:
    """Every visible line of ``table`` as drawn now, one (character, style) per cell."""
    lines = table.render_lines(Region(0, 0, table.size.width, table.size.height))
    return [[(ch, seg.style) for seg in strip for ch in seg.text] for strip in lines]


async def test_a_tick_repaints_the_moved_cells_alone_and_composes_no_row(
    tmp_path: Path,
) -> None:
    """The stamps advance with the (injected) clock; a tick repaints only their cells.

    Textual's ``DataTable`` composes a whole line from every cell of its row; one moving
    column made every recent row's line be composed again each second. A tick now marks
    only the moved cells' regions on screen and splices the new cells (their renders
    before, with the new characters) into the lines drawn before — which must be
    exactly the lines a full draw makes.
    """
    app = _app(tmp_path / "home", timedelta(seconds=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ReceiptTable)
        compositor = app.screen._compositor
        partial, compose = compositor.render_partial_update, table._render_line_in_row
        render = app.console.render_lines
        dirty: list[Region] = []
        composed = rendered = 0

        def watching() -> Any:
            dirty.extend(compositor._dirty_regions)
            return partial()

        def composing(*args: Any, **kwargs: Any) -> Any:
            nonlocal composed
            composed += 1
            return compose(*args, **kwargs)

        def rendering(*args: Any, **kwargs: Any) -> Any:
            nonlocal rendered
            rendered += 1
            return render(*args, **kwargs)

        column = table.get_column_index("observed")
        rows = [i for i, key in enumerate(table.keys) if key.startswith("r:")]
        origin = table.content_region.offset
        moved = {table._get_cell_region(Coordinate(row, column)).translate(origin) for row in rows}
        for second in (1, 2, 3):
            clock.freeze(NOW + timedelta(seconds=second))
            dirty.clear()
            composed = rendered = 0
            compositor.render_partial_update = watching  # type: ignore[method-assign]
            table._render_line_in_row = composing  # type: ignore[method-assign]
            app.console.render_lines = rendering  # type: ignore[method-assign]
            app.tick()
            await settle(pilot)
            await pilot.pause()
            compositor.render_partial_update = partial  # type: ignore[method-assign]
            table._render_line_in_row = compose  # type: ignore[method-assign]
            app.console.render_lines = render  # type: ignore[method-assign]
            assert set(dirty) == moved, (sorted(dirty), sorted(moved))
            # No row composed, and no cell rendered through Rich: "12s" → "13s" keeps
            # every character's place, so the cells' renders before are reused.
            assert (composed, rendered) == (0, 0)
            shown = screen_text(app)
            assert f"{11 + second}s" in shown and f"{10 + second}s" not in shown
        spliced = _cells(table)
        table._clear_caches()
        assert spliced == _cells(table)


async def test_stamps_stay_right_when_the_cursor_moves_between_ticks(tmp_path: Path) -> None:
    """A line drawn with the cursor elsewhere is never shown with an old stamp."""
    app = _app(tmp_path / "home", timedelta(seconds=10))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(ReceiptTable)
        for second in (1, 2, 3, 4):
            clock.freeze(NOW + timedelta(seconds=second))
            app.tick()
            await settle(pilot)
            await pilot.press("down" if second % 2 else "up")
            await settle(pilot)
            shown = screen_text(app)
            assert shown.count(f"{11 + second}s") == 1, shown
            assert f"{10 + second}s" not in shown
            spliced = _cells(table)
            table._clear_caches()
            assert spliced == _cells(table), f"at +{second} s"
