"""2026 push subscriptions name each task once (``chit.reconcile.push``).

Re-subscribing every live task whenever a few were created cost the server two row reads
per live task per subscription — most of its time while thousands of tasks were being
created. New tasks now get a stream of their own; a stream whose tasks all ended is
closed; past ``max_streams`` the open ones are folded into one naming every live task.
Against ``chit demo-server`` (in process, 2026): the streams open, the pushes arrive on
them, and each task is named by one stream at a time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.reconcile.connections import ClientOptions, ConnectionPool
from chit.reconcile.push import PushSubscriptions
from chit.tasks.client import InProcessServer, TaskClient, TaskHandle
from chit.tasks.client.inputs import Hint

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _until(condition: Callable[[], bool], within: float = 60) -> None:
    with anyio.fail_after(within):  # a safety net: each step waits for an event
        while not condition():
            await anyio.sleep(0.02)


async def _start(client: TaskClient, seconds: float) -> str:
    handle = await client.start(
        "slow_compute", {"seconds": seconds}, request_key=f"k-{uuid.uuid4()}"
    )
    assert isinstance(handle, TaskHandle)
    return handle.task_id


async def test_new_tasks_get_a_stream_of_their_own_ended_ones_close_many_fold(
    tmp_path: Path,
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    ended: set[str] = set()

    async def on_hint(task_id: str) -> None:
        if isinstance(task_id, Hint) and task_id.status == "completed":
            ended.add(str(task_id))

    async with anyio.create_task_group() as tg:
        options = ClientOptions(mode="2026", read_timeout=30)
        pool = ConnectionPool(lambda _name: spec, tg, options, on_hint=on_hint)
        push = PushSubscriptions(pool, tg, resubscribe_s=0.01, max_streams=3, fold_after_s=3600)
        client = await pool.get("demo")

        async def batch(*seconds: float) -> list[str]:
            ids = [await _start(client, s) for s in seconds]
            for task_id in ids:
                push.track("demo", task_id, live=True)
            return ids

        first = frozenset(await batch(600, 600))
        await _until(lambda: push.streams("demo") == [first])
        long, short = await batch(600, 0.3)
        second = frozenset([long, short])
        # Only the new tasks are named again, and the pushes arrive on their stream.
        await _until(lambda: push.streams("demo") == [first, second])
        assert push.subscribed["demo"] == first | second
        await _until(lambda: short in ended)
        for task_id in first:  # the reconciler saw them end
            push.track("demo", task_id, live=False)
        await _until(lambda: push.streams("demo") == [second])
        third = frozenset(await batch(600))
        await _until(lambda: push.streams("demo") == [second, third])
        fourth = frozenset(await batch(600))
        await _until(lambda: push.streams("demo") == [second, third, fourth])
        fifth = frozenset(await batch(600))
        # A fourth stream would pass max_streams: one names every live task instead.
        await _until(lambda: push.streams("demo") == [second | third | fourth | fifth])
        assert push.subscriptions == 5
        tg.cancel_scope.cancel()
    await pool.aclose()


async def test_streams_fold_into_one_once_no_new_task_comes(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with anyio.create_task_group() as tg:
        options = ClientOptions(mode="2026", read_timeout=30)
        pool = ConnectionPool(lambda _name: spec, tg, options)
        push = PushSubscriptions(pool, tg, resubscribe_s=0.01, fold_after_s=0.2)
        client = await pool.get("demo")
        first = await _start(client, 600)
        push.track("demo", first, live=True)
        await _until(lambda: push.streams("demo") == [frozenset([first])])
        second = await _start(client, 600)
        push.track("demo", second, live=True)
        # Two streams while tasks come, one (naming both) once they stop coming.
        await _until(lambda: push.streams("demo") == [frozenset([first, second])])
        assert push.subscriptions == 3
        tg.cancel_scope.cancel()
    await pool.aclose()
