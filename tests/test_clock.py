"""The injectable clock: virtual time moves only when a test moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from chit import clock
from chit.clock import MANUAL_START, Clock, ManualClock, SystemClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_both_clocks_are_clocks() -> None:
    clocks: list[Clock] = [SystemClock(), ManualClock()]
    assert all(c.now().tzinfo is not None for c in clocks)


async def test_manual_sleep_wakes_only_when_time_passes_it() -> None:
    clk = ManualClock()
    woke: list[float] = []

    async def sleeper() -> None:
        await clk.sleep(5)
        woke.append(clk.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await clock.settle()
        assert clk.pending == 1
        clk.advance(4.9)
        await clock.settle()
        assert woke == []
        clk.advance(0.1)
        await clock.settle()
        assert woke == [5.0]
    assert clk.pending == 0
    assert clk.now() == MANUAL_START + timedelta(seconds=5)


async def test_manual_move_on_after_cancels_at_the_deadline() -> None:
    clk = ManualClock()
    never = anyio.Event()
    outcome: list[bool] = []

    async def waiter() -> None:
        with clk.move_on_after(2) as scope:
            await never.wait()
        outcome.append(scope.cancelled_caught)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await clock.settle()
        clk.advance(1.999)
        await clock.settle()
        assert outcome == []
        clk.advance(0.001)
    assert outcome == [True]
    assert clk.pending == 0  # the scope's timer went with it


async def test_a_finished_block_leaves_no_timer() -> None:
    clk = ManualClock()
    with clk.move_on_after(10):
        await anyio.lowlevel.checkpoint()
    assert clk.pending == 0 and clk.next_deadline() is None


async def test_run_for_lets_a_loop_take_every_tick() -> None:
    clk = ManualClock()
    ticks: list[float] = []
    stop = anyio.Event()

    async def loop() -> None:
        while not stop.is_set():
            await clk.sleep(0.1)
            ticks.append(round(clk.monotonic(), 6))

    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        await clk.run_for(1.0)
        stop.set()
        tg.cancel_scope.cancel()
    assert ticks == [round(0.1 * i, 6) for i in range(1, 11)]


async def test_advance_fires_timers_in_order_and_never_goes_back() -> None:
    clk = ManualClock()
    order: list[str] = []

    async def at(name: str, seconds: float) -> None:
        await clk.sleep(seconds)
        order.append(name)

    async with anyio.create_task_group() as tg:
        for name, seconds in (("c", 3.0), ("a", 1.0), ("b", 2.0)):
            tg.start_soon(at, name, seconds)
        await clock.settle()
        assert clk.next_deadline() == 1.0
        clk.advance(10)
    assert order == ["a", "b", "c"]
    with pytest.raises(ValueError):
        clk.advance(-1)


def test_use_makes_the_module_functions_follow() -> None:
    clk = ManualClock(datetime(2030, 5, 1, tzinfo=UTC))
    with clock.use(clk) as installed:
        assert installed is clk and clock.current_clock() is clk
        assert clock.now() == datetime(2030, 5, 1, tzinfo=UTC)
        clk.advance(90)
        assert clock.iso() == "2030-05-01T00:01:30.000Z"
        assert clock.monotonic() == 90
    assert isinstance(clock.current_clock(), SystemClock)
    assert clock.now().year != 2030 or clock.now() != datetime(2030, 5, 1, 0, 1, 30, tzinfo=UTC)


def test_freeze_still_moves_the_real_clocks_now() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    with clock.frozen(at):
        assert clock.now() == at
        clock.advance(5)
        assert clock.now() == at + timedelta(seconds=5)
    assert clock.now() > at


async def test_system_clock_sleeps_and_deadlines_are_anyios() -> None:
    real = SystemClock()
    with real.move_on_after(0) as scope:
        await anyio.sleep(10)
    assert scope.cancelled_caught
    before = real.monotonic()
    await real.sleep(0)
    assert real.monotonic() >= before
