"""Task status notifications read off a stdio server's pipes (``chit.tasks.client.hint_queue``).

Through the SDK every task notification cost two validations, a task of its own and a
FIFO of 256 that dropped the oldest when full (a task's end among them). Here a frame is
recognised on the pipes, coalesced per task (newest wins; a status that moved in between
is not trusted) and delivered in order by one task: nothing is dropped however many
arrive, and a real stdio server's notifications still reach ``on_hint`` and the
protocol log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.reconcile.protocol_log import ProtocolLog
from chit.tasks.client import Mode, TaskClient, TaskHandle
from chit.tasks.client.hint_queue import BURST, HintQueue, task_note
from chit.tasks.client.inputs import Hint
from tests.engine_support import demo_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def test_task_note_recognises_both_generations_and_nothing_else() -> None:
    for method in ("notifications/tasks", "notifications/tasks/status"):
        params = {"taskId": "t-1", "status": "working", "statusMessage": "step 1"}
        found = task_note(_line({"jsonrpc": "2.0", "method": method, "params": params}))
        assert found is not None and found[0] == "t-1" and found[1] == params
    others: list[dict[str, Any]] = [
        # a reply quoting the method, another notification, a request, malformed frames
        {"jsonrpc": "2.0", "id": 3, "result": {"text": '"notifications/tasks'}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"taskId": "t"}},
        {"jsonrpc": "2.0", "id": 4, "method": "notifications/tasks", "params": {"taskId": "t"}},
        {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"taskId": 7}},
        {"jsonrpc": "2.0", "method": "notifications/tasks", "params": ["t"]},
        {"jsonrpc": "1.0", "method": "notifications/tasks", "params": {"taskId": "t"}},
    ]
    for message in others:
        assert task_note(_line(message)) is None
    assert task_note(b'{"jsonrpc": "2.0", "method": "notifications/tasks"') is None
    assert task_note(b"[" * 100_000) is None  # nested past the parser's depth


async def test_the_queue_keeps_the_newest_per_task_and_drops_nothing() -> None:
    got: list[tuple[str, Any]] = []

    async def deliver(task_id: str, params: dict[str, Any]) -> None:
        got.append((task_id, params.get("status")))

    queue = HintQueue(deliver)
    # Far more than the SDK's FIFO of 256 held, all offered before delivery can start.
    for i in range(1000):
        queue.offer(f"t-{i}", {"status": "working", "statusMessage": "a"})
    queue.offer("t-0", {"status": "working", "statusMessage": "b"})  # same status: newest
    queue.offer("t-1", {"status": "input_required"})
    queue.offer("t-1", {"status": "working"})  # moved in between: not trusted
    queue.offer("t-2", {"status": "input_required"})
    queue.offer("t-2", {"status": "completed"})  # an end is final: kept as said
    assert len(queue) == 1000 and queue.coalesced == 5
    async with anyio.create_task_group() as tg:
        tg.start_soon(queue.run)
        with anyio.fail_after(30):
            while len(got) < 1000:
                await anyio.sleep(0)
        tg.cancel_scope.cancel()
    assert [tid for tid, _ in got] == [f"t-{i}" for i in range(1000)]  # arrival order
    assert got[:3] == [("t-0", "working"), ("t-1", None), ("t-2", "completed")]


async def test_a_failing_delivery_does_not_stop_the_others_nor_starve_the_loop() -> None:
    got: list[str] = []
    marks: list[int] = []  # how often the other task had run, at each delivery
    ticks = 0

    async def deliver(task_id: str, params: dict[str, Any]) -> None:
        if task_id == "bad":
            raise RuntimeError("a broken receiver")
        got.append(task_id)
        marks.append(ticks)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0)

    queue = HintQueue(deliver)
    queue.offer("bad", {})
    for i in range(4 * BURST):
        queue.offer(f"t-{i}", {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(queue.run)
        with anyio.fail_after(30):
            while len(got) < 4 * BURST:
                await anyio.sleep(0)
        tg.cancel_scope.cancel()
    assert got == [f"t-{i}" for i in range(4 * BURST)]
    # Delivering never yields by itself: the other task ran only between bursts.
    assert marks[0] == marks[BURST - 2] < marks[-1]


class _Hints:
    def __init__(self) -> None:
        self.seen: list[Hint] = []

    async def __call__(self, task_id: str) -> None:
        assert isinstance(task_id, Hint)
        self.seen.append(task_id)


@pytest.mark.parametrize("mode", ["legacy", "2026"])
async def test_a_stdio_servers_notifications_reach_on_hint_off_the_pipes(
    mode: Mode, tmp_path: Path
) -> None:
    hints, log = _Hints(), ProtocolLog()
    spec = demo_stdio(tmp_path / "d.db")
    async with TaskClient(
        spec, mode=mode, read_timeout=30, on_hint=hints, tap=log.tap("demo")
    ) as tc:
        handle = await tc.start("slow_compute", {"seconds": 0.5}, request_key="k")
        assert isinstance(handle, TaskHandle)
        async with tc.watch([handle.task_id]):
            with anyio.fail_after(60):
                while not any(h == handle.task_id and h.status == "completed" for h in hints.seen):
                    await anyio.sleep(0.05)
        assert tc.hints.offered >= 1  # read off the pipes, not through the SDK
    method = "notifications/tasks/status" if mode == "legacy" else "notifications/tasks"
    shown = [m for m in log.messages("demo", limit=1000) if m.method == method]
    assert shown and all(m.direction == "received" for m in shown)
