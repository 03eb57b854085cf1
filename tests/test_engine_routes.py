"""No hint is left for the next poll cycle.

* A task created while this process reconciles is subscribed to at once, and every live
  receipt's route (task id → receipt, push subscription) is opened when reconciling
  starts — not at each receipt's first check, which after a restart with many live
  receipts could be seconds away (the cause of the 5-second tail in
  docs/performance.md, "Reconcile").
* A 2025 push saying a task ended goes straight to the ``tasks/result`` it implies.
* A push arriving while the receipt's own write is still in its batch triggers one more
  check at once, recorded as a notification-driven check, not a later poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp_types import CallToolResult, TextContent

from chit.demo.server import build_demo_server
from chit.receipts import (
    Event,
    LifecycleState,
    ObservationSource,
    Receipt,
    ResultObserved,
    StatusObserved,
    TaskProtocol,
)
from chit.reconcile.observe import TaskObserver
from chit.runtime import Completed, EngineEvent, Supervisor
from chit.tasks.client import InProcessServer, TaskClient, TransientError
from chit.tasks.client.inputs import Hint
from chit.tasks.client.models import TaskOutcome
from tests.engine_support import fast_options, supervisor
from tests.store_support import make_receipt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

DONE = datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_hint_carries_the_notified_update_time() -> None:
    hint = Hint.from_params("t", {"status": "completed", "lastUpdatedAt": DONE.isoformat()})
    assert hint.updated_at == DONE
    naive = Hint.from_params("t", {"lastUpdatedAt": "2026-05-01T12:00:00"})
    assert naive.updated_at == datetime(2026, 5, 1, 12, tzinfo=UTC)
    for odd in (3, "yesterday", "9" * 100, None):
        assert Hint.from_params("t", {"lastUpdatedAt": odd}).updated_at is None


# ----------------------------------------------------------------- 2025: result first
class _Client:
    """Records which requests a check sends; answers ``tasks/result`` as told."""

    def __init__(self, outcome: TaskOutcome | Exception) -> None:
        self.outcome = outcome
        self.sent: list[str] = []

    async def result(self, task_id: str, *, timeout: float | None = None) -> TaskOutcome:
        self.sent.append("tasks/result")
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    async def get(self, task_id: str) -> Any:
        self.sent.append("tasks/get")
        raise LookupError("the ordinary path")


def _done() -> TaskOutcome:
    text = TextContent(type="text", text="all done")
    return TaskOutcome(status="completed", result=CallToolResult(content=[text]))


async def test_ended_2025_hint_asks_for_the_result_only() -> None:
    receipt = make_receipt("r-1").model_copy(update={"protocol": TaskProtocol.LEGACY})
    client = _Client(_done())
    ended = Hint("t-1", "completed", "finished", DONE)
    events = await TaskObserver(b"k" * 32, 5.0).observe(
        cast(TaskClient, client), receipt, "t-1", ObservationSource.NOTIFICATION, ended
    )
    assert client.sent == ["tasks/result"]  # no tasks/get before it
    status, result = events
    assert isinstance(status, StatusObserved) and status.status is LifecycleState.COMPLETED
    assert status.server_updated_at == DONE and status.source is ObservationSource.NOTIFICATION
    assert isinstance(result, ResultObserved) and result.summary == "all done"


async def test_a_wrong_or_failing_end_hint_falls_back_to_tasks_get() -> None:
    receipt = make_receipt("r-1").model_copy(update={"protocol": TaskProtocol.LEGACY})
    client = _Client(TransientError("no answer in time", method="tasks/result"))
    observer = TaskObserver(b"k" * 32, 5.0)
    with pytest.raises(LookupError):
        await observer.observe(
            cast(TaskClient, client), receipt, "t-1", ObservationSource.NOTIFICATION,
            Hint("t-1", "completed"),
        )  # fmt: skip
    assert client.sent == ["tasks/result", "tasks/get"]
    modern = make_receipt("r-2")  # 2026: the result comes inline with tasks/get
    client = _Client(_done())
    with pytest.raises(LookupError):
        await observer.observe(
            cast(TaskClient, client), modern, "t-2", ObservationSource.NOTIFICATION,
            Hint("t-2", "completed"),
        )  # fmt: skip
    assert client.sent == ["tasks/get"]


async def test_reconciler_keeps_only_end_hints_for_the_check(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("legacy")) as sup:
        rec = sup.reconciler
        r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": "e"})
        task_id = rec.handles.task_id(r)
        await rec.on_hint(Hint(task_id, "input_required"))
        assert r.receipt_id in rec._hinted and r.receipt_id not in rec._ended
        await rec.on_hint(Hint(task_id, "failed", None, DONE))
        assert rec._ended[r.receipt_id].updated_at == DONE


async def test_2025_task_ends_with_its_result_and_server_time(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    done = anyio.Event()
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("legacy")) as sup:
        sup.subscribe(lambda e: done.set() if isinstance(e, Completed) else None)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            r = await sup.call("demo", "slow_compute", {"seconds": 0.3, "label": "z"})
            with anyio.fail_after(30):
                await done.wait()
            stop.set()
        stored = sup.store.receipts.require(r.receipt_id)
        assert stored.state is LifecycleState.COMPLETED and stored.outcome is not None
        assert stored.outcome.summary == "Computed z in 0.3 s"
        assert stored.server_updated_at is not None and stored.server_updated_at > r.status_at


# ------------------------------------------------------------------ routes from the start
async def _reconciling(sup: Supervisor, tg: Any, stop: anyio.Event) -> None:
    tg.start_soon(sup.run, stop)
    with anyio.fail_after(10):
        while not sup.reconciler._running:
            await anyio.sleep(0.01)


async def test_task_created_while_reconciling_is_subscribed_at_once(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        adopted: list[str] = []
        real_adopt = rec.adopt

        def spy(receipt: Any, task_id: str) -> None:
            adopted.append(task_id)
            real_adopt(receipt, task_id)

        sup.calls.on_task = spy
        quiet = await sup.call("demo", "slow_compute", {"seconds": 30, "label": "q"})
        assert adopted == [rec.handles.task_id(quiet)]
        assert not rec.push._wanted.get("demo")  # not reconciling: nothing subscribed
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await _reconciling(sup, tg, stop)
            r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": "s"})
            task_id = rec.handles.task_id(r)
            assert adopted[-1] == task_id
            assert task_id in rec.push._wanted["demo"]  # before any check of it
            stop.set()


async def test_reconciling_opens_every_live_route_first(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        made = [
            await sup.call("demo", "slow_compute", {"seconds": 30, "label": f"l{i}"})
            for i in range(3)
        ]
        tasks = {r.receipt_id: rec.handles.task_id(r) for r in made}
        # A fresh process knows no route yet: a hint for these tasks would be dropped.
        rec.handles._by_task.clear()
        rec.handles._by_receipt.clear()
        assert all(rec.handles.receipt_for(t) is None for t in tasks.values())
        assert rec.adopt_live() == 3
        assert {rec.handles.receipt_for(t) for t in tasks.values()} == set(tasks)
        assert set(tasks.values()) <= rec.push._wanted["demo"]
        await rec.on_hint(Hint(tasks[made[0].receipt_id], "completed"))
        assert made[0].receipt_id in rec._hinted  # routed before any check


async def test_push_during_the_receipts_own_write_is_checked_at_once(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    events: list[EngineEvent] = []
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        sup.subscribe(events.append)
        gate, at_gate = anyio.Event(), anyio.Event()
        real_submit = sup.writer.submit
        held: list[str] = []

        async def gated(receipt_id: str, events: Sequence[Event], **kw: Any) -> Receipt:
            if not held:  # hold the first write of the check in its batch
                held.append(receipt_id)
                at_gate.set()
                await gate.wait()
            return await real_submit(receipt_id, events, **kw)

        sup.writer.submit = gated  # type: ignore[method-assign]
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await _reconciling(sup, tg, stop)
            r = await sup.call("demo", "slow_compute", {"seconds": 1.5, "label": "b"})
            rec.kick([r.receipt_id], ObservationSource.POLL)  # a check while it works
            with anyio.fail_after(30):
                await at_gate.wait()  # its first check saw "working"; its write waits
                while r.receipt_id not in rec._again:  # the end is pushed meanwhile
                    await anyio.sleep(0.02)
                gate.set()
                while not any(isinstance(e, Completed) for e in events):
                    await anyio.sleep(0.02)
            stop.set()
        timeline = sup.store.observations.timeline(r.receipt_id)
        ended = [o for o in timeline if o.status is LifecycleState.COMPLETED]
        assert ended and ended[0].source is ObservationSource.NOTIFICATION
