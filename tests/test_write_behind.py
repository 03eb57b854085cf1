"""Checks that saw nothing new are held in memory and written together (write-behind).

``chit.reconcile.behind``: while the reconciler runs, a poll that moved only freshness
commits nothing of its own; the store catches up once the oldest held check has waited
``WRITE_BEHIND_S``, with the receipt's next real change, or when reconciling stops. On a
manual clock against the in-process demo server (a 3,600 s task: its message changes
every 36 s, so the polls between are unchanged).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from chit.clock import ManualClock
from chit.demo.server import build_demo_server
from chit.receipts import LifecycleState, Receipt, StatusObserved
from chit.reconcile import writer as writer_module
from chit.reconcile.behind import WRITE_BEHIND_S, Behind
from chit.reconcile.writer import BATCH_WINDOW_S
from chit.runtime import Supervisor
from chit.store import Store
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _repeats(sup: Supervisor, rid: str) -> int:
    """Observations the timeline counts (a row's ``repeats`` includes itself)."""
    return sum(o.repeats for o in sup.store.observations.timeline(rid))


def _elsewhere(sup: Supervisor, rid: str) -> Receipt:
    """The receipt as another process (or a restart after a crash) would read it."""
    with Store.open_path(sup.store.path) as other:
        return other.receipts.require(rid)


@dataclass
class Reconciling:
    """The supervisor reconciling on ``clock``, with one live 3,600 s task (``rid``)."""

    sup: Supervisor
    clock: ManualClock
    rid: str
    _stop: anyio.Event
    _ended: anyio.Event

    async def idle(self) -> None:
        """Wait until no check is in flight.

        After ``run_for`` every task waits for something. A check still in flight waits
        either for a real thread (the demo server's store: it ends on its own) or, one
        that found news in the last ``BATCH_WINDOW_S`` of the time run, for the writer's
        batch window on this clock, which nothing else moves: a bare ``idle()`` would
        wait for it until the test's timeout. So: wait, and while a check stays in
        flight, let virtual time run one batch window at a time.
        """
        while True:
            with anyio.move_on_after(0.5) as waited:  # real time: a thread's share
                await self.sup.reconciler.idle()
            if not waited.cancelled_caught:
                return
            await self.clock.run_for(BATCH_WINDOW_S)

    async def held(self) -> Receipt:
        """Let 2.5 s of checks run (under the flush's 5 s) and return the receipt they hold."""
        await self.clock.run_for(2.5)
        await self.idle()
        in_hand = self.sup.writer.behind.ahead(self.rid)
        assert in_hand is not None
        return in_hand

    async def stop(self) -> None:
        """Stop reconciling and wait until it stopped (what it held is written then)."""
        self._stop.set()
        await self._ended.wait()


@asynccontextmanager
async def reconciling(tmp_path: Path) -> AsyncIterator[Reconciling]:
    """The demo server in process, a supervisor on a manual clock reconciling it, and a
    3,600 s task whose first progress is written (its message changes every 36 s, so the
    polls that follow are unchanged)."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    clk = ManualClock()
    async with supervisor(
        tmp_path / "home", {"demo": spec}, fast_options("2026"), clock=clk
    ) as sup:
        stop, ended = anyio.Event(), anyio.Event()

        async def run() -> None:
            try:
                await sup.reconciler.run(stop)
            finally:
                ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                rid = await _started(sup, clk)
                yield Reconciling(sup, clk, rid, stop, ended)
            finally:
                stop.set()


async def _started(sup: Supervisor, clk: ManualClock) -> str:
    r = await sup.call("demo", "slow_compute", {"seconds": 3600})
    for _ in range(20):  # until a check wrote the first progress message (news)
        await clk.run_for(0.5)
        message = sup.store.receipts.require(r.receipt_id).status_message or ""
        if message.startswith("Computing"):
            break
    else:
        raise AssertionError("the task's first progress was never written")
    return r.receipt_id


async def test_unchanged_polls_commit_nothing_until_the_flush(tmp_path: Path) -> None:
    async with reconciling(tmp_path) as run:
        sup, clk, rid = run.sup, run.clock, run.rid
        stored = _elsewhere(sup, rid)
        tx, checks, polls = sup.writer.transactions, sup.reconciler.checks, _repeats(sup, rid)
        await clk.run_for(WRITE_BEHIND_S - 1.5)
        await run.idle()
        held = sup.reconciler.checks - checks
        assert held >= 2
        # Nothing committed: not the receipt, not its timeline.
        assert sup.writer.transactions == tx
        assert _elsewhere(sup, rid) == stored
        assert _repeats(sup, rid) == polls
        in_hand = sup.writer.behind.ahead(rid)
        assert in_hand is not None and in_hand.status_at > stored.status_at
        assert in_hand.version == stored.version  # what the checks compare with
        # The schedule took the next checks from memory: one per poll interval,
        # not one per scan of the store's older next check.
        assert held <= WRITE_BEHIND_S - 1.5 + 1
        await clk.run_for(2.5)  # the oldest held check is due to be written
        await run.idle()
        await clk.run_for(0.1)
        after = _elsewhere(sup, rid)
        assert sup.writer.transactions > tx
        assert after.version == stored.version + 1
        assert after.status_at >= in_hand.status_at  # the newest held check, at least
        assert after.state is LifecycleState.WORKING
        assert after.status_message == stored.status_message
        # Every poll is on the timeline, counted as repeats of the same row.
        done = sup.reconciler.checks - checks
        assert _repeats(sup, rid) + len(sup.writer.behind.pending) >= polls + 1
        assert _repeats(sup, rid) <= polls + done


async def test_a_change_writes_the_held_checks_with_it(tmp_path: Path) -> None:
    async with reconciling(tmp_path) as run:
        sup, rid = run.sup, run.rid
        polls = _repeats(sup, rid)
        await run.clock.run_for(2.5)
        await run.idle()
        in_hand = sup.writer.behind.ahead(rid)
        assert in_hand is not None
        held = sum(1 + row[1] for row in sup.writer.behind.pending[rid].rows)
        news = StatusObserved(status=LifecycleState.WORKING, message="something new")
        written = sup.writer.apply(rid, [news])
        assert sup.writer.behind.ahead(rid) is None
        assert _elsewhere(sup, rid) == written
        assert written.status_message == "something new"
        # The held polls are on the timeline, before the news.
        timeline = sup.store.observations.timeline(rid)
        assert timeline[-1].message == "something new"
        assert _repeats(sup, rid) == polls + held + 1


async def test_stopping_writes_what_was_held(tmp_path: Path) -> None:
    async with reconciling(tmp_path) as run:
        sup, clk, rid = run.sup, run.clock, run.rid
        in_hand = await run.held()
        await run.stop()
        await clk.run_for(0.1)
        assert not sup.writer.behind.pending
        stored = _elsewhere(sup, rid)
        assert stored.status_at == in_hand.status_at
        assert stored.next_check_at == in_hand.next_check_at
        assert stored.stale_after == in_hand.stale_after
        assert stored.version == in_hand.version + 1


async def test_closing_the_writer_waits_for_a_flush_in_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reconciler's tick starts a flush in a task of its own; the writer's close must
    # not close the worker connection under the chunk it is writing (a SIGSEGV in
    # sqlite3_changes64 in the benchmark: the UPDATE's step ended on a closed handle).
    async with reconciling(tmp_path) as run:
        sup, rid = run.sup, run.rid
        in_hand = await run.held()
        started, go = threading.Event(), threading.Event()
        write_chunk = writer_module.write_chunk

        def gated(entries: Sequence[Behind], store: Store) -> list[Receipt | None]:
            started.set()
            go.wait(30)
            return write_chunk(entries, store)

        monkeypatch.setattr(writer_module, "write_chunk", gated)
        closed = anyio.Event()

        async def close() -> None:
            await sup.writer.aclose()
            closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.writer.flush_behind)  # as the tick does
            await anyio.to_thread.run_sync(started.wait)
            tg.start_soon(close)
            try:
                await anyio.wait_all_tasks_blocked()
                assert not closed.is_set()  # still writing: the close waits
            finally:
                go.set()
        assert sup.writer.batch_store is None and not sup.writer.behind.pending
        stored = _elsewhere(sup, rid)
        assert stored.status_at == in_hand.status_at
        assert stored.version == in_hand.version + 1


async def test_a_crash_before_the_flush_loses_only_freshness(tmp_path: Path) -> None:
    async with reconciling(tmp_path) as run:
        sup, clk, rid = run.sup, run.clock, run.rid
        in_hand = await run.held()
        # What a restart after a crash now would find: the receipt as last written,
        # only its freshness older — and, since its next check has passed, due at once.
        crashed = _elsewhere(sup, rid)
        fresh = {"status_at", "next_check_at", "stale_after"}
        assert crashed.model_dump(exclude=fresh) == in_hand.model_dump(exclude=fresh)
        assert crashed.status_at < in_hand.status_at
        assert crashed.next_check_at is not None
        assert crashed.next_check_at <= clk.now()
        with Store.open_path(sup.store.path) as other:
            assert rid in other.receipts.due_ids(clk.now())
