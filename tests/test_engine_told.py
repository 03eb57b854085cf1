"""A 2026 push saying a task ended is the ``tasks/get`` answer: no round trip after it.

The extension's ``notifications/tasks`` carries the whole DetailedTask, "identical to
what ``tasks/get`` would have returned at that moment" (SEP-2663); a terminal one is
folded as that reply, checked the same way, so the receipt commits without waiting for
a connection slot and a reply (the 2026 notification → store tail in
docs/performance.md). Anything that does not parse as a terminal DetailedTask of that
task is asked the ordinary way.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.receipts import (
    LifecycleState,
    ObservationSource,
    ResultObserved,
    StatusObserved,
    TaskProtocol,
)
from chit.reconcile.observe import TaskObserver
from chit.runtime import Completed
from chit.tasks.client import InProcessServer, TaskClient
from chit.tasks.client.inputs import Hint
from tests.engine_support import fast_options, supervisor
from tests.store_support import make_receipt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

DONE = "2026-05-01T12:00:00.123000+00:00"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _pushed(task_id: str, **change: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "taskId": task_id,
        "status": "completed",
        "createdAt": "2026-05-01T11:59:58+00:00",
        "lastUpdatedAt": DONE,
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
        "result": {"content": [{"type": "text", "text": "all done"}], "isError": False},
        "_meta": {"io.modelcontextprotocol/subscriptionId": 7},
    }
    params.update(change)
    return {k: v for k, v in params.items() if v is not None}


def test_hint_keeps_the_params_it_was_built_from() -> None:
    params = _pushed("t-1")
    assert Hint.from_params("t-1", params).params is params
    assert Hint("t-1", "completed").params is None  # built by hand: nothing to fold


def test_a_terminal_2026_push_is_folded_as_the_tasks_get_answer() -> None:
    observer = TaskObserver(b"k" * 32, 5.0)
    receipt = make_receipt("r-1")
    assert receipt.protocol is TaskProtocol.EXTENSION
    events = observer.told(receipt, "t-1", Hint.from_params("t-1", _pushed("t-1")))
    assert events is not None
    status, result = events
    assert isinstance(status, StatusObserved) and status.status is LifecycleState.COMPLETED
    assert status.source is ObservationSource.NOTIFICATION
    assert status.server_updated_at is not None and status.server_updated_at.isoformat() == DONE
    assert isinstance(result, ResultObserved) and result.summary == "all done"
    failed = _pushed("t-1", status="failed", result=None, error={"code": -1, "message": "no"})
    events = observer.told(receipt, "t-1", Hint.from_params("t-1", failed))
    assert events is not None and isinstance(events[0], StatusObserved)
    assert events[0].status is LifecycleState.FAILED


@pytest.mark.parametrize(
    "params",
    [
        _pushed("t-other"),  # another task's object
        _pushed("t-1", status="working", result=None),  # not an end
        _pushed("t-1", result=None),  # completed without its result
        _pushed("t-1", lastUpdatedAt="yesterday"),
        _pushed("t-1", pollIntervalMs="5"),
        {"taskId": "t-1", "status": "completed"},  # a bare status, no DetailedTask
    ],
    ids=["other-task", "live", "no-result", "bad-time", "bad-type", "bare"],
)
def test_anything_but_a_sound_end_is_asked_the_ordinary_way(params: dict[str, Any]) -> None:
    observer = TaskObserver(b"k" * 32, 5.0)
    assert observer.told(make_receipt("r-1"), "t-1", Hint.from_params("t-1", params)) is None


def test_a_2025_or_ended_receipt_is_not_told() -> None:
    observer = TaskObserver(b"k" * 32, 5.0)
    hint = Hint.from_params("t-1", _pushed("t-1"))
    legacy = make_receipt("r-1").model_copy(update={"protocol": TaskProtocol.LEGACY})
    assert observer.told(legacy, "t-1", hint) is None  # 2025: tasks/result (result first)
    ended = make_receipt("r-2", state=LifecycleState.COMPLETED)
    assert observer.told(ended, "t-1", hint) is None  # its result is retrieved as before


async def test_a_pushed_end_commits_without_tasks_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    asked: list[str] = []
    real_get = TaskClient.get

    async def get(self: TaskClient, task_id: str) -> Any:
        asked.append(task_id)
        return await real_get(self, task_id)

    monkeypatch.setattr(TaskClient, "get", get)
    done = anyio.Event()
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        sup.subscribe(lambda e: done.set() if isinstance(e, Completed) else None)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            r = await sup.call("demo", "slow_compute", {"seconds": 0.5, "label": "p"})
            # No await since the call returned: no poll of it ran. Its next poll is two
            # minutes away, so only the push can end it within the test.
            sup.writer.apply(
                r.receipt_id,
                [StatusObserved(status=LifecycleState.WORKING, poll_interval_ms=120_000)],
            )
            task_id = sup.reconciler.handles.task_id(r)
            with anyio.fail_after(30):
                await done.wait()
            stop.set()
        stored = sup.store.receipts.require(r.receipt_id)
        assert stored.state is LifecycleState.COMPLETED and stored.outcome is not None
        assert stored.outcome.summary == "Computed p in 0.5 s"
        assert task_id not in asked  # the push was the answer
        assert not sup.reconciler._ended  # nothing left for a later check
        assert sup.reconciler.observer.ends_told == 1


async def test_a_check_waiting_for_its_slot_uses_the_end_pushed_meanwhile() -> None:
    """A queued check (promoted by the push) is handed the end: it asks nothing either."""

    class NoGet:
        async def get(self, task_id: str) -> Any:
            raise AssertionError("tasks/get sent")

    observer = TaskObserver(b"k" * 32, 5.0)
    ended = Hint.from_params("t-1", _pushed("t-1"))
    events = await observer.observe(
        NoGet(),  # type: ignore[arg-type]
        make_receipt("r-1"),
        "t-1",
        ObservationSource.POLL,
        ended,
    )
    assert [type(e) for e in events] == [StatusObserved, ResultObserved]


async def test_an_end_pushed_while_a_check_asks_is_written_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll in flight when the end is pushed commits the end: no second check waits
    for this answer's commit, a slot and another commit (the in-flight tail)."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": "f"})
        task_id = rec.handles.task_id(r)
        asked: list[str] = []
        real_get = TaskClient.get

        async def get(self: TaskClient, tid: str) -> Any:
            asked.append(tid)
            working = await real_get(self, tid)  # asked before the end...
            later = (working.updated_at + timedelta(seconds=1)).isoformat()
            end = _pushed(tid, lastUpdatedAt=later)
            await rec.on_hint(Hint.from_params(tid, end))  # ...the end pushed meanwhile
            return working

        monkeypatch.setattr(TaskClient, "get", get)
        after = await rec.check(r.receipt_id, ObservationSource.POLL)
        assert asked == [task_id]
        assert after is not None and after.state is LifecycleState.COMPLETED
        assert after.outcome is not None and after.outcome.summary == "all done"
        assert not rec._ended
