"""Timelines record changes, not polls: unchanged polls fold into the last row (×N)."""

from __future__ import annotations

import io
import os
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from chit import clock
from chit.cli.main import cli
from chit.home import Home
from chit.receipts import (
    Event,
    LifecycleState,
    Receipt,
    ResultObserved,
    RetrievalCondition,
    RetrievalFailed,
    StatusObserved,
)
from chit.reconcile.writer import ReceiptWriter
from chit.store import Store
from tests.cli_support import seed_many, seed_receipt

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def frozen() -> Iterator[None]:
    clock.freeze(T0)
    try:
        yield
    finally:
        clock.unfreeze()


def _poll(message: str = "step 1 of 100") -> StatusObserved:
    return StatusObserved(status=LifecycleState.WORKING, message=message, poll_interval_ms=1000)


def test_unchanged_polls_fold_into_the_last_row(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    rid = seed_receipt(home, handle="handle-abcdef-123456", now=clock.now()).receipt_id
    with Store.open(home) as store:
        writer = ReceiptWriter(store)
        for _ in range(240):
            clock.advance(1)
            writer.apply(rid, [_poll()])
        clock.advance(1)
        writer.apply(rid, [_poll("step 2 of 100")])
        clock.advance(1)
        writer.apply(rid, [_poll("step 2 of 100")])
        timeline = store.observations.timeline(rid)
        receipt = store.receipts.require(rid)
    assert [o.message for o in timeline] == ["Starting", "step 1 of 100", "step 2 of 100"]
    assert [o.repeats for o in timeline] == [1, 240, 2]
    assert timeline[1].at == T0 + timedelta(seconds=1)
    assert timeline[1].last_at == T0 + timedelta(seconds=240)
    # the receipt itself says when it was last observed
    assert receipt.status_at == T0 + timedelta(seconds=242)

    out = CliRunner().invoke(cli, ["--home", str(home.root), "show", rid])
    assert out.exit_code == 0, out.output
    assert re.search(r"step 1 of 100  ×240 \(last 2026-01-01T00:04:00\.000Z\)", out.output)
    js = CliRunner().invoke(cli, ["--home", str(home.root), "show", "--json", rid])
    assert '"repeats": 240' in js.output


def test_the_tui_timeline_shows_the_count(tmp_path: Path, frozen: None) -> None:
    from rich.console import Console
    from textual.app import App

    from chit.tui.view import load_detail
    from chit.tui.widgets.detail import render_receipt

    home = Home(tmp_path / "home")
    rid = seed_receipt(home, handle="handle-abcdef-654321", now=clock.now()).receipt_id
    with Store.open(home) as store:
        writer = ReceiptWriter(store)
        for _ in range(240):
            clock.advance(1)
            writer.apply(rid, [_poll()])
        detail = load_detail(store, rid, clock.now())
    assert detail is not None
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    console.print(render_receipt(detail, App().theme_variables))
    text = console.export_text()
    assert "×240" in text and "00:00:01–00:04:00" in text  # the TUI's own layout of it


def test_news_always_gets_its_own_row(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    rid = seed_receipt(home, handle="handle-abcdef-777777", now=clock.now()).receipt_id
    down = RetrievalFailed(condition=RetrievalCondition.UNREACHABLE, message="connection refused")
    with Store.open(home) as store:
        writer = ReceiptWriter(store)
        events: list[Event] = [_poll(), down, down, down, _poll(), _poll()]
        for event in events:
            clock.advance(1)
            writer.apply(rid, [event])
        timeline = store.observations.timeline(rid)
    kinds = [(o.kind.value, o.repeats) for o in timeline]
    # created; the poll; unreachable (×3); reachable again (news: the condition changed)
    assert kinds == [("status", 1), ("status", 1), ("retrieval_error", 3), ("status", 2)]


# --- a simulated day -------------------------------------------------------------------

RECEIPTS = int(os.environ.get("CHIT_SIM_RECEIPTS", "1000"))
SECONDS = int(
    os.environ.get("CHIT_SIM_SECONDS", "86400" if os.environ.get("CHIT_NIGHTLY") else "30")
)


def _plan(rng: random.Random, seconds: int) -> dict[int, list[Event]]:
    """A few real changes for one receipt: messages, an outage, the end."""
    plan: dict[int, list[Event]] = {}
    ticks = sorted(rng.sample(range(1, seconds - 8), 4))
    for n, tick in enumerate(ticks[:3], start=2):
        plan[tick] = [_poll(f"step {n} of 100")]
    outage = ticks[3]
    for tick in range(outage, outage + 4):
        plan[tick] = [RetrievalFailed(condition=RetrievalCondition.UNREACHABLE, message="refused")]
    plan[seconds] = [
        StatusObserved(status=LifecycleState.COMPLETED, message="done"),
        ResultObserved(summary="ok"),
    ]
    return plan


# the changes each receipt sees: the first poll's message (the receipt was created with
# "Starting"), 3 more messages, unreachable, reachable again, completed, the result
CHANGES = 8


@pytest.mark.timeout(3600 if os.environ.get("CHIT_NIGHTLY") else 600)
def test_a_simulated_day_keeps_one_row_per_change(tmp_path: Path, frozen: None) -> None:
    """1,000 receipts polled every second on an advanced clock, a few changes each.

    Every poll goes through the batched writer the reconciler uses, so a poll costs a real
    write (~0.5 ms here): CI simulates ``CHIT_SIM_SECONDS`` (30 s, 30,000 polls) and
    ``CHIT_NIGHTLY=1`` the whole day (86,400 polls per receipt, 86.4 million writes).
    """
    home = Home(tmp_path / "home")
    rids = seed_many(home, RECEIPTS)
    rng = random.Random(11)
    plans = {rid: _plan(rng, SECONDS) for rid in rids}
    current = {rid: _poll() for rid in rids}  # what the server says right now

    async def day(store: Store) -> None:
        writer = ReceiptWriter(store, max_batch=RECEIPTS)
        known: dict[str, Receipt] = {rid: store.receipts.require(rid) for rid in rids}

        async def poll(rid: str, tick: int) -> None:
            events = plans[rid].get(tick)
            if events is None and known[rid].retrieval is not RetrievalCondition.FRESH:
                events = [current[rid]]  # back after the outage
            if events is not None and isinstance(events[0], StatusObserved):
                current[rid] = events[0]
            known[rid] = await writer.submit(rid, events or [current[rid]], base=known[rid])

        for tick in range(1, SECONDS + 1):
            clock.advance(1)
            async with anyio.create_task_group() as tg:
                for rid in rids:
                    if not known[rid].is_terminal:
                        tg.start_soon(poll, rid, tick)

    with Store.open(home) as store:
        anyio.run(day, store)
        rows = {
            r["receipt_id"]: (int(r["n"]), int(r["seen"]))
            for r in store.db.execute(
                "SELECT receipt_id, count(*) AS n, sum(repeats) AS seen FROM observations"
                " GROUP BY receipt_id"
            ).fetchall()
            for r in [dict(zip(("receipt_id", "n", "seen"), r, strict=True))]
        }
        final = store.receipts.require(rids[0])
    assert final.state is LifecycleState.COMPLETED
    assert final.status_at == T0 + timedelta(seconds=SECONDS)
    for rid in rids:
        count, seen = rows[rid]
        assert count <= CHANGES + 1, (rid, count)
        # every poll is accounted for: the created row, then one per second
        assert seen == 1 + SECONDS + 1, (rid, seen)  # +1: the result arrives with the end
