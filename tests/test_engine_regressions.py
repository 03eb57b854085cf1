"""Regressions in the reconciler: each test failed before its fix."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.clock import ManualClock
from chit.demo.server import build_demo_server
from chit.errors import UsageError
from chit.receipts import (
    AcceptanceState,
    LifecycleState,
    ObservationSource,
    Receipt,
    RetrievalCondition,
    StatusObserved,
)
from chit.runtime import Supervisor
from chit.store import StaleWrite, StoreIOError
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor, wait_receipt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _answered_to_the_end(sup: Supervisor, accept_if: str) -> Receipt:
    r = await sup.call("demo", "confirm_delete", {"filename": "x.txt"}, accept_if=accept_if)
    r = await sup.follow(r.receipt_id)
    assert r.state is LifecycleState.INPUT_REQUIRED and r.pending_inputs
    r = await sup.answer(r.receipt_id, r.pending_inputs[0].key, {"confirm": True})
    r = await wait_receipt(sup, r.receipt_id, lambda x: x.is_terminal and x.outcome is not None)
    # Whatever the reconciler does next, the verdict must already be there.
    await sup.reconciler.check(r.receipt_id)
    return sup.store.receipts.require(r.receipt_id)


@pytest.mark.parametrize(
    ("check", "verdict"),
    [
        ('text contains "NEVER-THERE"', AcceptanceState.REJECTED),
        ('text contains "Deleted"', AcceptanceState.ACCEPTED),
    ],
)
async def test_legacy_answered_task_runs_its_acceptance_check(
    tmp_path: Path, check: str, verdict: AcceptanceState
) -> None:
    """2025: the tasks/result watcher records the result, and the verdict with it."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("legacy")) as sup:
        r = await _answered_to_the_end(sup, check)
        assert r.state is LifecycleState.COMPLETED
        assert r.outcome is not None and "Deleted x.txt" in r.outcome.summary
        assert r.acceptance.state is verdict, r.acceptance


async def test_a_retried_write_that_landed_is_not_reported_failed(tmp_path: Path) -> None:
    """The batch COMMIT fails; a receipt retried on its own lands and ``submit`` says so."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        ids = []
        for i in range(2):
            r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": f"c{i}"})
            ids.append(r.receipt_id)
        plain, stale = ids
        # The batches commit on the writer's own connection (in its worker thread).
        batch_store = sup.writer.batch_store
        assert batch_store is not None
        db = batch_store.db
        real_update = batch_store.receipts.update
        real_commit = db.commit
        # Stale twice: once in the batch, once more when read again inside it, so it is
        # re-written on its own after the batch (a single stale is retried in the batch).
        stale_left, fail_once = {stale: 2}, [True]

        def flaky_update(receipt: Any, *args: Any, **kwargs: Any) -> Any:
            if stale_left.get(receipt.receipt_id):
                stale_left[receipt.receipt_id] -= 1
                raise StaleWrite("someone else wrote")
            return real_update(receipt, *args, **kwargs)

        def failing_commit() -> None:
            if fail_once and db.conn.in_transaction:
                fail_once.clear()
                raise StoreIOError("disk I/O error at COMMIT")
            real_commit()

        batch_store.receipts.update = flaky_update  # type: ignore[method-assign]
        db.commit = failing_commit  # type: ignore[method-assign]
        results: dict[str, Any] = {}

        async def one(rid: str, msg: str) -> None:
            event = StatusObserved(
                status=LifecycleState.WORKING, source=ObservationSource.POLL, message=msg
            )
            try:
                results[rid] = await sup.writer.submit(rid, [event])
            except Exception as exc:
                results[rid] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, plain, "plain")
            tg.start_soon(one, stale, "retried")
        assert not fail_once, "the batch COMMIT was not reached"
        # The batch did not land: its receipt's check sees the error.
        assert isinstance(results[plain], StoreIOError)
        assert sup.store.receipts.require(plain).status_message != "plain"
        # The stale receipt was re-written on its own after the batch: that write landed.
        stored = sup.store.receipts.require(stale)
        assert stored.status_message == "retried"
        assert isinstance(results[stale], Receipt), results[stale]
        assert results[stale].version == stored.version


async def _checks_for(sup: Supervisor, clk: ManualClock, seconds: float) -> int:
    """Run the reconciler for ``seconds`` of virtual time; how many checks did it make?"""
    before = sup.reconciler.checks
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.reconciler.run, stop)
        await clk.run_for(seconds)
        stop.set()
    await sup.reconciler.idle()
    return sup.reconciler.checks - before


def _make_due(sup: Supervisor) -> None:
    sup.store.db.execute("UPDATE receipts SET next_check_at = '2000-01-01T00:00:00.000000Z'")
    sup.store.db.conn.commit()


async def test_removed_server_is_recorded_not_rechecked_every_tick(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    servers = {"demo": spec}
    clk = ManualClock()
    async with supervisor(tmp_path / "home", servers, fast_options("2026"), clock=clk) as sup:
        rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id
        del servers["demo"]  # `chit servers remove demo`
        sup.pool.broken("demo")
        _make_due(sup)
        with caplog.at_level(logging.INFO, logger="chit.reconcile"):
            checks = await _checks_for(sup, clk, 10.0)
        assert checks == 1, checks  # was one per 50 ms tick: nothing written
        r = sup.store.receipts.require(rid)
        assert r.retrieval is RetrievalCondition.INCOMPATIBLE
        assert r.retrieval_error and "server 'demo' is no longer registered" in r.retrieval_error
        assert r.state is LifecycleState.WORKING  # the lifecycle is not touched
        assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]


async def test_unresolvable_server_backs_off(tmp_path: Path) -> None:
    """A resolver failure that may heal (locked vault, unset variable) is transient."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    clk = ManualClock()
    async with supervisor(
        tmp_path / "home", {"demo": spec}, fast_options("2026"), clock=clk
    ) as sup:
        rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id

        def locked(name: str) -> Any:
            raise UsageError(f"server {name!r} env.TOKEN: variable TOKEN is not set")

        sup.pool._resolve = locked
        sup.pool.broken("demo")
        _make_due(sup)
        checks = await _checks_for(sup, clk, 10.0)
        assert 2 <= checks <= 4, checks  # backoff 2 s, 4 s, 8 s — not 200 ticks' worth
        r = sup.store.receipts.require(rid)
        assert r.retrieval is RetrievalCondition.UNREACHABLE
        assert r.retrieval_error and "TOKEN is not set" in r.retrieval_error
        assert r.next_check_at is not None  # still scheduled, later


async def test_unexpected_check_error_is_recorded_with_backoff(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    clk = ManualClock()
    async with supervisor(
        tmp_path / "home", {"demo": spec}, fast_options("2026"), clock=clk
    ) as sup:
        rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id

        async def broken(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError("boom")

        sup.reconciler.observer.observe = broken  # type: ignore[method-assign]
        _make_due(sup)
        checks = await _checks_for(sup, clk, 10.0)
        assert 2 <= checks <= 4, checks  # backoff 2 s, 4 s, 8 s — not 200 ticks' worth
        r = sup.store.receipts.require(rid)
        assert r.retrieval is RetrievalCondition.UNREACHABLE
        assert r.retrieval_error and "RuntimeError: boom" in r.retrieval_error
