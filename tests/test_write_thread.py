"""The checks' write batches commit in a worker thread, on a connection of their own.

The event loop keeps running while a batch's COMMIT waits for the disk; ``submit`` still
returns only after COMMIT; the change feed never delivers a batch's change before its
bus event (which carries the state before the change); a manual clock does not move
while a batch is in the thread.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream

from chit import clock
from chit.clock import ManualClock, in_thread
from chit.demo.server import build_demo_server
from chit.engine.local import LocalEngine
from chit.engine.models import EngineEvent, ReceiptUpdate
from chit.receipts import LifecycleState, ObservationSource, Receipt, StatusObserved, new_intent
from chit.reconcile import ReceiptWriter
from chit.store import AlreadyExists
from chit.tasks.client import InProcessServer
from tests.engine_support import demo_engine, fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

WAIT_S = 20.0
"""Bound on waiting for another thread (a deadline, never an expected duration)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _status(message: str) -> StatusObserved:
    return StatusObserved(
        status=LifecycleState.WORKING, source=ObservationSource.POLL, message=message
    )


def _gate_commit(writer: ReceiptWriter, *, after: bool) -> tuple[threading.Event, threading.Event]:
    """Make the batch connection's COMMIT wait for ``release`` (before or after it lands).

    Returns ``(reached, release)``: ``reached`` is set when the COMMIT is reached (``after``:
    once it has landed).
    """
    store = writer.batch_store
    assert store is not None, "the writer has no batch connection"
    db = store.db
    real_commit = db.commit
    reached, release = threading.Event(), threading.Event()

    def gated() -> None:
        if after:
            real_commit()
        reached.set()
        assert release.wait(WAIT_S), "the test never released the COMMIT"
        if not after:
            real_commit()

    db.commit = gated  # type: ignore[method-assign]
    return reached, release


async def _reached(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, WAIT_S), "the COMMIT was never reached"


async def test_the_loop_runs_while_a_batch_commits_and_submit_waits_for_commit(
    tmp_path: Path,
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id
        reached, release = _gate_commit(sup.writer, after=False)
        results: list[Receipt] = []

        async def write() -> None:
            results.append(await sup.writer.submit(rid, [_status("off the loop")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await _reached(reached)
            # The COMMIT waits in the worker thread, and this loop still runs: it reads
            # the store (the change is not there yet) and the write is not acknowledged.
            await anyio.lowlevel.checkpoint()
            assert sup.store.receipts.require(rid).status_message != "off the loop"
            assert results == []
            release.set()
        stored = sup.store.receipts.require(rid)
        assert stored.status_message == "off the loop"
        assert results[0].version == stored.version


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[LocalEngine]:
    async with demo_engine(tmp_path) as e:  # not reconciling: the test writes itself
        yield e


def _drain(stream: ObjectReceiveStream[EngineEvent]) -> list[EngineEvent]:
    assert isinstance(stream, MemoryObjectReceiveStream)  # the feed's own streams
    events: list[EngineEvent] = []
    while True:
        try:
            events.append(stream.receive_nowait())
        except anyio.WouldBlock:
            return events


async def test_the_feed_waits_for_a_committed_batchs_own_event(engine: LocalEngine) -> None:
    """A batch committed in the thread is not delivered before its bus event."""
    sup = engine.supervisor
    rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id
    async with engine.feed.subscribe() as stream:
        _drain(stream)
        reached, release = _gate_commit(sup.writer, after=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.writer.submit, rid, [_status("batched")])
            await _reached(reached)
            # Committed (this loop's connection sees it), its events not yet sent: what
            # a data_version tick of the feed would do now must not deliver it.
            assert sup.store.receipts.require(rid).status_message == "batched"
            engine.feed.pump()
            early = [e for e in _drain(stream) if isinstance(e, ReceiptUpdate)]
            assert early == []
            release.set()
        with anyio.fail_after(WAIT_S):
            update = await stream.receive()
            while not isinstance(update, ReceiptUpdate) or update.receipt.receipt_id != rid:
                update = await stream.receive()
    assert update.receipt.status_message == "batched"
    assert update.changes, "delivered without the change its bus event names"


async def test_a_manual_clock_waits_for_work_in_a_thread() -> None:
    clk = ManualClock()
    go = threading.Event()
    seen: list[float] = []

    def work() -> float:
        assert go.wait(WAIT_S)
        return clk.monotonic()

    async def worker() -> None:
        seen.append(await in_thread(clk, work))

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        # The thread is released from another thread, whenever that runs: time must not
        # have moved past the work however late it is.
        releaser = threading.Timer(0.05, go.set)
        releaser.start()
        await clk.run_for(5)
    releaser.join()
    assert seen == [0.0]
    assert clk.monotonic() == 5


async def test_a_calls_intent_commits_off_the_loop_before_its_request_leaves(
    tmp_path: Path,
) -> None:
    """The intent's COMMIT waits in the thread: the loop runs, nothing is sent yet."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        await sup.call("demo", "greet", {"name": "warm"})  # connected, tools listed
        sent: list[str] = []
        real_send = sup.calls.send

        async def send(intent: Any, *args: Any, **kwargs: Any) -> Receipt:
            # The intent is durable when the request is about to leave.
            assert sup.store.intents.get(intent.request_key) is not None
            sent.append(intent.request_key)
            return await real_send(intent, *args, **kwargs)

        sup.calls.send = send  # type: ignore[method-assign]
        reached, release = _gate_commit(sup.writer, after=False)
        results: list[Receipt] = []

        async def call() -> None:
            results.append(await sup.call("demo", "slow_compute", {"seconds": 30}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _reached(reached)
            await anyio.lowlevel.checkpoint()  # the loop runs while the COMMIT waits
            assert sent == [] and results == []
            release.set()
        assert len(sent) == 1 and results[0].request_key == sent[0]
        assert sup.store.receipts.require(results[0].receipt_id).state is LifecycleState.WORKING


async def test_writes_queued_during_a_commit_form_one_group_and_fail_alone(
    tmp_path: Path,
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        group = sup.writer.group
        reached, release = _gate_commit(sup.writer, after=False)
        done: list[str] = []

        async def begin(key: str) -> None:
            intent = new_intent(
                request_key=key, server="demo", tool="t", args_digest="d", now=clock.now()
            )
            try:
                done.append(
                    (await group.run(lambda store: store.intents.begin(intent))).request_key
                )
            except AlreadyExists:
                done.append("refused")

        async with anyio.create_task_group() as tg:
            tg.start_soon(begin, "first")
            await _reached(reached)  # the first group's COMMIT waits: these queue
            for key in ("a", "b", "a"):
                tg.start_soon(begin, key)
            await anyio.lowlevel.checkpoint()
            groups = group.groups
            release.set()
        assert group.groups == groups + 2  # "first" alone, then the three together
        assert sorted(done) == ["a", "b", "first", "refused"]  # the reused key alone
        assert all(sup.store.intents.get(k) is not None for k in ("first", "a", "b"))


async def _watcher_caught_up(engine: LocalEngine) -> None:
    """Wait for the feed's watcher to have seen every commit of other connections."""
    feed = engine.feed
    with anyio.fail_after(WAIT_S):
        while feed._data_version != feed._read_data_version():
            await anyio.sleep(0.05)  # the watcher's tick, polled (not a fixed wait)


async def test_a_change_announced_behind_a_batchs_floor_is_delivered(engine: LocalEngine) -> None:
    """A write on the loop while a batch waits for the thread is delivered, although the
    batch announces nothing.

    The daemon records a legacy task's result on the loop (``ReceiptWriter.apply``, from
    ``tasks/result``) while a check's batch holds the feed's floor: the result's bus event
    pumps up to the floor only. The check, folded on the finished receipt, wrote nothing
    and announced nothing; before the fix the result then waited for an unrelated write,
    and ``chit proxy``'s task for the host never ended (tests/test_proxy_inputs.py, at load
    10: the receipt completed, the host polled ``working`` for 180 s).
    """
    sup = engine.supervisor
    writer = sup.writer
    rid = (await sup.call("demo", "slow_compute", {"seconds": 30})).receipt_id
    async with engine.feed.subscribe(receipt_id=rid) as stream:
        await _watcher_caught_up(engine)  # the call's own commits are old news to it
        _drain(stream)
        limiter = writer._thread_limiter()
        # Holding the thread's limiter: the batch takes its floor, then waits for it.
        async with anyio.create_task_group() as tg, limiter:
            tg.start_soon(partial(writer.submit, rid, [_status("the result")], skip_freshness=True))
            with anyio.fail_after(WAIT_S):
                while writer.announced_through() is None:
                    await anyio.lowlevel.checkpoint()
            writer.apply(rid, [_status("the result")])  # committed and announced now
            early = [e for e in _drain(stream) if isinstance(e, ReceiptUpdate)]
            assert early == [], "read past the batch's floor"
        # The batch ran: the receipt already said it, so the check was skipped (a hint's
        # check that finds nothing new writes nothing: no other connection commits).
        assert writer.announced_through() is None and writer.skipped == 1
        with anyio.fail_after(WAIT_S):
            update = await stream.receive()
            while not isinstance(update, ReceiptUpdate):
                update = await stream.receive()
    assert update.receipt.status_message == "the result"
    assert update.changes, "delivered without the change its bus event names"
