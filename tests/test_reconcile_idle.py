"""An idle reconciler sleeps until its next check instead of scanning 20 times a second.

The daemon runs the reconciler for its whole life, so its idle cost is the daemon's
(issue 9: under 1 % of a core). On a manual clock: the schedule is read about once a
virtual second while nothing is due, a check due sooner is still made on time, and a
receipt made in this process wakes the loop at once.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from chit import clock
from chit.clock import ManualClock
from chit.demo.server import build_demo_server
from chit.reconcile.reconciler import IDLE_WAIT_S
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _count_scans(sup: Supervisor) -> list[int]:
    scans = [0]
    due = sup.reconciler.schedule.due

    def counted(limit: int = 1000) -> list[str]:
        scans[0] += 1
        return due(limit)

    sup.reconciler.schedule.due = counted  # type: ignore[method-assign]
    return scans


def _schedule(sup: Supervisor, clk: ManualClock, seconds: float) -> None:
    at = clock.iso(clk.now() + timedelta(seconds=seconds))
    sup.store.db.execute("UPDATE receipts SET next_check_at = ?", [at])
    sup.store.db.conn.commit()


async def test_idle_loop_scans_about_once_a_second_and_checks_on_time(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    clk = ManualClock()
    servers = {"demo": spec}
    async with supervisor(tmp_path / "home", servers, fast_options("2026"), clock=clk) as sup:
        await sup.call("demo", "slow_compute", {"seconds": 3600})
        _schedule(sup, clk, 60)
        scans = _count_scans(sup)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.reconciler.run, stop)
            before = sup.reconciler.checks
            await clk.run_for(10.0)
            # Was one scan per 50 ms tick (200 in 10 s).
            assert scans[0] <= 10.0 / IDLE_WAIT_S + 2, scans[0]
            assert sup.reconciler.checks == before
            # A check due in 0.3 s is made then, not at the next second.
            _schedule(sup, clk, 0.3)
            await clk.run_for(IDLE_WAIT_S)  # the loop looks again within this ...
            await clk.run_for(0.35)  # ... and sleeps until the check is due
            await sup.reconciler.idle()
            assert sup.reconciler.checks == before + 1
            stop.set()


async def test_a_receipt_made_here_wakes_the_idle_loop(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    clk = ManualClock()
    servers = {"demo": spec}
    async with supervisor(tmp_path / "home", servers, fast_options("2026"), clock=clk) as sup:
        scans = _count_scans(sup)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.reconciler.run, stop)
            await clk.run_for(0.0)
            looked = scans[0]
            await sup.call("demo", "slow_compute", {"seconds": 3600})
            await clock.settle()  # no time passes: only the commit can have woken it
            assert scans[0] > looked
            stop.set()
