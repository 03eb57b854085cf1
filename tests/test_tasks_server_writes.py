"""The store write queue: message writes merged per task, durable writes first, order kept."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import pytest

from chit.clock import settle
from chit.tasks.server import TaskRuntime
from chit.tasks.server.store import TaskRecord
from chit.tasks.server.writes import Superseded, WriteQueue


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Harness:
    """Holds the queue's slot with a blocking write, then records what runs, in order."""

    def __init__(self) -> None:
        self.queue = WriteQueue()
        self.ran: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.gate = threading.Event()

    def write(self, name: str) -> Callable[[], str]:
        def fn() -> str:
            self.ran.append(name)
            return name

        return fn

    async def block(self) -> None:
        def hold() -> str:
            self.gate.wait(5)
            return "block"

        await self.queue.run(hold)

    async def submit(
        self, name: str, key: str | None, *, message: bool = False, replaces: bool = False
    ) -> None:
        try:
            await self.queue.run(
                self.write(name), key=key, message=message, replaces_message=replaces
            )
            self.outcomes[name] = "ran"
        except Superseded:
            self.outcomes[name] = "superseded"


async def run_scenario(steps: list[tuple[str, str | None, bool, bool]]) -> Harness:
    """Block the slot, queue ``steps`` (name, key, message, replaces) in order, release."""
    h = Harness()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.block)
            await settle()
            for name, key, message, replaces in steps:
                tg.start_soon(partial(h.submit, name, key, message=message, replaces=replaces))
                await settle()
            await settle()
            h.gate.set()
    return h


@pytest.mark.anyio
async def test_message_writes_merge_latest_wins() -> None:
    h = await run_scenario(
        [
            ("a1", "a", True, False),
            ("b1", "b", True, False),
            ("a2", "a", True, False),
            ("a3", "a", True, False),
        ]
    )
    assert h.ran == ["a3", "b1"]  # a keeps its place in line, with its newest write
    assert h.outcomes == {"a1": "superseded", "a2": "superseded", "a3": "ran", "b1": "ran"}
    assert h.queue.superseded == 2


@pytest.mark.anyio
async def test_durable_writes_go_first() -> None:
    h = await run_scenario(
        [
            ("a-msg", "a", True, False),
            ("b-msg", "b", True, False),
            ("c-done", "c", False, True),
            ("create", None, False, False),
            ("d-msg", "d", True, False),
            ("e-done", "e", False, True),
        ]
    )
    assert h.ran == ["c-done", "create", "e-done", "a-msg", "b-msg", "d-msg"]


@pytest.mark.anyio
async def test_terminal_write_drops_the_tasks_pending_message() -> None:
    h = await run_scenario(
        [
            ("a-msg", "a", True, False),
            ("b-msg", "b", True, False),
            ("a-done", "a", False, True),
            ("a-late-msg", "a", True, False),  # asked after: must land after the terminal
        ]
    )
    assert h.outcomes["a-msg"] == "superseded"
    assert h.ran.index("a-done") < h.ran.index("a-late-msg")
    assert "a-msg" not in h.ran
    assert h.ran == ["a-done", "b-msg", "a-late-msg"]


@pytest.mark.anyio
async def test_durable_write_without_message_keeps_older_message_first() -> None:
    h = await run_scenario(
        [
            ("b-msg", "b", True, False),
            ("a-msg", "a", True, False),
            ("a-answer", "a", False, False),  # does not set the message: a-msg lands first
        ]
    )
    assert h.ran == ["a-msg", "a-answer", "b-msg"]
    assert h.outcomes["a-msg"] == "ran"


@pytest.mark.anyio
async def test_cancelled_waiter_leaves_the_line_and_the_slot_moves_on() -> None:
    h = Harness()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.block)
            await settle()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await h.submit("gone", "a", message=True)
            tg.start_soon(h.submit, "next", "b")
            await settle()
            assert len(h.queue) == 1
            h.gate.set()
    assert h.ran == ["next"]
    assert len(h.queue) == 0


@pytest.mark.anyio
async def test_runtime_terminal_status_is_never_overwritten_by_a_message(tmp_path: Path) -> None:
    runtime = TaskRuntime(tmp_path / "tasks.db")
    h = Harness()
    runtime.writes = h.queue
    now = runtime.now_ms()
    runtime.store.insert(
        TaskRecord(
            id="t1",
            principal="",
            tool="chatty",
            args={},
            args_digest="",
            request_key=None,
            status="working",
            status_message=None,
            created_at_ms=now,
            updated_at_ms=now,
            ttl_ms=60_000,
            expires_at_ms=now + 60_000,
            poll_interval_ms=500,
            protocol="2026",
            owner_id=runtime.owner_id,
        )
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.block)
            await settle()
            tg.start_soon(runtime.set_status_message, "t1", "step 1")
            await settle()
            tg.start_soon(runtime.set_status_message, "t1", "step 2")
            await settle()
            tg.start_soon(runtime.cancel, "t1")
            await settle()
            tg.start_soon(runtime.set_status_message, "t1", "step 3")
            await settle()
            assert [k for k, _ in h.queue.pending()] == ["t1", "t1"]  # cancel, then step 3
            h.gate.set()
    record = runtime.store.get("t1")
    assert record is not None
    assert record.status == "cancelled"
    assert record.status_message == "Cancelled at the client's request"
    assert h.queue.superseded == 2  # step 1 by step 2, step 2 by the cancel
    runtime.store.close()
