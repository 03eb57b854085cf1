"""Pilot helpers shared by the TUI tests."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from chit.receipts import Receipt
from chit.store import Store
from chit.tui.app import ChitApp
from chit.tui.widgets.receipt_table import ReceiptTable


async def settle(pilot: Pilot[None], limit: float = 60.0) -> None:
    """Let workers finish, the model publish, and the screen catch up; fail if it never does.

    Bounded by time, not by rounds: a hundred rounds of ``pause`` passed in about two
    seconds, which a loaded machine's first load outlasted — the test then went on
    before the first snapshot and its toasts (a snapshot test caught one on screen).
    The bound is a safety net (``limit`` seconds, generous for a loaded machine), and
    reaching it is a failure naming what was still busy: a wait that silently gave up
    let the test go on against a half-loaded screen and hid the race.
    """
    app = pilot.app
    deadline = time.monotonic() + limit
    while True:
        await pilot.pause()
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            # An exclusive worker (the detail read) superseded by a newer one while we
            # waited: normal when events arrive fast or the machine is loaded; wait again.
            pass
        else:
            if not isinstance(app, ChitApp) or app.settled:
                break
        if time.monotonic() >= deadline:
            busy = [w.name or repr(w) for w in app.workers if not w.is_finished]
            raise AssertionError(
                f"the app never settled in {limit:g} s (workers still busy: {busy or 'none'};"
                f" settled={getattr(app, 'settled', None)})"
            )
    await pilot.pause()


async def until(
    pilot: Pilot[None], ready: Callable[[], bool], what: str, limit: float = 30.0
) -> None:
    """Pump the app until ``ready()`` holds; fail naming ``what`` after ``limit`` seconds.

    ``pilot.pause()`` alone waits for the process to look idle by its CPU time, which a
    loaded machine fakes (a descheduled process burns none): a step that must have
    happened (a dialog mounted, an error shown) is waited for as that event.
    """
    deadline = time.monotonic() + limit
    while not ready():
        assert time.monotonic() < deadline, f"the app never got to: {what}"
        await pilot.pause(0.02)


async def quiet(pilot: Pilot[None]) -> None:
    """Settle, then dismiss toasts so they do not cover what a snapshot checks."""
    await settle(pilot)
    pilot.app.clear_notifications()
    await pilot.pause()


async def select(pilot: Pilot[None], receipt_id: str) -> None:
    """Move the main table's cursor to ``receipt_id``."""
    app = pilot.app
    assert isinstance(app, ChitApp)
    table = app.screen.query_one(ReceiptTable)
    table.move_cursor(row=table._keys.index(f"r:{receipt_id}"), animate=False)
    await settle(pilot)


def stored(app: ChitApp, receipt_id: str) -> Receipt:
    """The whole receipt as the store has it (the table's rows are projections)."""
    with Store.open(app.backend.home) as store:
        return store.receipts.require(receipt_id)


def screen_text(app: ChitApp) -> str:
    """What a person sees on the screen now: the screenshot's text, line by line."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        x, y = float(m.group(1)), float(m.group(2))
        rows.setdefault(y, []).append((x, html.unescape(m.group(3))))
    lines = []
    for y in sorted(rows):
        lines.append("".join(t for _, t in sorted(rows[y])).replace("\xa0", " "))
    return "\n".join(lines)
