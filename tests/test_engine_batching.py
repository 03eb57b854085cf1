"""The reconciler's write batcher, the two-lane limiter, 2026 push and keyed digests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.clock import settle
from chit.demo.server import build_demo_server
from chit.errors import UsageError
from chit.receipts import (
    IntentState,
    LifecycleState,
    ObservationSource,
    StatusObserved,
    args_digest,
    new_intent,
)
from chit.reconcile.limits import PriorityLimiter
from chit.runtime import Supervisor
from chit.store import StaleWrite
from chit.tasks.client import InProcessServer
from tests.engine_support import demo_stdio, fast_options, supervisor, wait_receipt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _receipts(sup: Supervisor, n: int) -> list[str]:
    ids = []
    for i in range(n):
        r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": f"b{i}"})
        ids.append(r.receipt_id)
    return ids


def _working(source: ObservationSource = ObservationSource.POLL, msg: str = "") -> StatusObserved:
    return StatusObserved(status=LifecycleState.WORKING, source=source, message=msg or None)


async def test_batch_commits_once_and_isolates_a_stale_receipt(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        ids = await _receipts(sup, 6)
        writer = sup.writer
        batch_store = writer.batch_store  # the batches' own connection (worker thread)
        assert batch_store is not None
        real_update = batch_store.receipts.update
        stale_once = {ids[2]}

        def flaky_update(receipt: Any, *args: Any, **kwargs: Any) -> Any:
            if receipt.receipt_id in stale_once:
                stale_once.discard(receipt.receipt_id)
                raise StaleWrite("someone else wrote")
            return real_update(receipt, *args, **kwargs)

        batch_store.receipts.update = flaky_update  # type: ignore[method-assign]
        before_tx = writer.transactions
        results: dict[str, Any] = {}

        async def one(rid: str, msg: str) -> None:
            try:
                results[rid] = await writer.submit(rid, [_working(msg=msg)])
            except Exception as exc:
                results[rid] = exc

        async with anyio.create_task_group() as tg:
            for i, rid in enumerate(ids):
                tg.start_soon(one, rid, f"step {i}")
            tg.start_soon(one, "r-missing", "nobody")
        # One batch transaction: the stale receipt is read again and retried inside it.
        assert writer.transactions - before_tx == 1
        assert isinstance(results["r-missing"], Exception)  # its failure is its own
        for i, rid in enumerate(ids):
            stored = sup.store.receipts.require(rid)
            assert stored.status_message == f"step {i}", rid  # nobody lost, stale one retried
            assert results[rid].version == stored.version


async def test_hint_without_news_writes_nothing(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        # A task parked on input does not change between checks (slow_compute would:
        # its status message moves every step).
        rid = (await sup.call("demo", "confirm_delete", {"filename": "a.txt"})).receipt_id
        await sup.follow(rid)
        await sup.reconciler.check(rid, ObservationSource.POLL)
        before = sup.store.receipts.require(rid)
        rows = sup.store.observations.count(rid)
        after = await sup.reconciler.check(rid, ObservationSource.NOTIFICATION)
        assert after is not None and after.version == before.version
        assert sup.store.observations.count(rid) == rows
        assert sup.writer.skipped >= 1
        polled = await sup.reconciler.check(rid, ObservationSource.POLL)  # a poll still writes
        assert polled is not None and polled.version == before.version + 1


async def test_limiter_serves_urgent_first_and_promotes() -> None:
    limiter = PriorityLimiter(1)
    order: list[str] = []
    gate = anyio.Event()

    async def holder() -> None:
        async with limiter.hold():
            await gate.wait()

    async def waiter(name: str, urgent: bool) -> None:
        async with limiter.hold(urgent=urgent, key=name):
            order.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await settle()  # the holder has the slot
        for name in ("poll-a", "poll-b", "poll-c"):
            tg.start_soon(waiter, name, False)
        await settle()  # all three wait, in that order
        tg.start_soon(waiter, "hint", True)
        await settle()
        assert limiter.held == 1 and limiter.waiting == 4
        assert limiter.promote("poll-c") and not limiter.promote("nobody")
        gate.set()
    assert order == ["hint", "poll-c", "poll-a", "poll-b"]
    assert limiter.held == 0 and limiter.waiting == 0


async def test_cancelled_waiter_passes_its_slot_on() -> None:
    limiter = PriorityLimiter(1)
    got: list[str] = []
    async with anyio.create_task_group() as tg, limiter.hold():
        scope = anyio.CancelScope()

        async def cancelled() -> None:
            with scope:
                async with limiter.hold():
                    got.append("cancelled")

        async def later() -> None:
            async with limiter.hold():
                got.append("later")

        tg.start_soon(cancelled)
        tg.start_soon(later)
        await settle()  # both wait for the slot
        assert limiter.waiting == 2
        scope.cancel()
    assert got == ["later"] and limiter.held == 0


@pytest.mark.timeout(90)
async def test_2026_push_updates_before_the_next_poll(tmp_path: Path) -> None:
    async with supervisor(
        tmp_path / "home", {"demo": demo_stdio(tmp_path / "tasks.db")}, fast_options("2026")
    ) as sup:
        r = await sup.call("demo", "slow_compute", {"seconds": 1.5, "label": "push"})
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await wait_receipt(sup, r.receipt_id, lambda x: x.is_terminal, within=20)
            stop.set()
        assert sup.reconciler.push.subscriptions >= 1
        done = sup.store.receipts.require(r.receipt_id)
        assert done.state is LifecycleState.COMPLETED and done.outcome is not None
        timeline = sup.store.observations.timeline(r.receipt_id)
        finished = next(o for o in timeline if o.status is LifecycleState.COMPLETED and o.applied)
        # The hint, not the schedule (due ≥ 1 s after the previous poll), found it.
        assert finished.source is ObservationSource.NOTIFICATION
        assert done.server_updated_at is not None
        assert (finished.at - done.server_updated_at).total_seconds() < 0.5


async def test_digests_are_keyed_and_retry_matches(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        args = {"seconds": 0.1, "label": "k"}
        r = await sup.follow((await sup.call("demo", "slow_compute", args)).receipt_id)
        assert r.args_digest.startswith("hmac-sha256:") and r.args_digest != args_digest(args)
        assert r.args_digest == args_digest(args, key=sup.handles.vault.digest_key())
        assert r.outcome is not None and (r.outcome.result_digest or "").startswith("hmac-sha256:")
        # An unknown intent (keyed, and one recorded before digests were keyed) retries
        # with the same arguments, and refuses others.
        now = r.accepted_at
        for key, digest in (
            ("rk-keyed", sup.arguments_digest(args | {"label": "u1"})),
            ("rk-plain", args_digest(args | {"label": "u2"})),
        ):
            intent = new_intent(
                request_key=key, server="demo", tool="slow_compute", args_digest=digest, now=now
            )
            sup.store.intents.begin(intent)
            sup.store.intents.mark(key, IntentState.UNKNOWN, error="lost reply")
        with pytest.raises(UsageError):
            await sup.retry_intent("rk-keyed", args | {"label": "other"})
        retried = await sup.retry_intent("rk-keyed", args | {"label": "u1"})
        assert retried.request_key == "rk-keyed"
        assert (await sup.retry_intent("rk-plain", args | {"label": "u2"})).request_key == (
            "rk-plain"
        )
