"""Changes reach every replica by push (PostgreSQL ``LISTEN/NOTIFY``), not by polling.

Two runtimes on one database, each with ``poll_s`` = 1 h: no re-read happens within a
test, so anything that arrives at all was pushed (no clock is asserted; the waits are
bounded only to end a hang). A client subscribed on replica B receives the completion of a task
replica A runs (2026), a 2025 client of A hears of a cancel answered by B, and an answer
given on B wakes A's parked worker.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp_types import TaskStatusNotificationParams

from chit.demo.server import build_demo_server
from tests.tasks_server_support import TaskWatch, create, make_client, poll, raw

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
SLOW_POLL_S = 3600.0
"""Longer than any test: a change that arrives cannot have come from a re-read."""
PUSHED_WITHIN_S = 45.0
"""Only ends a hang (below the test's timeout); never a figure under test."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def replica(url: str) -> Any:
    return build_demo_server(url, poll_s=SLOW_POLL_S)


async def test_2026_subscriber_on_b_sees_completion_of_task_run_on_a(pg_url: str) -> None:
    watch = TaskWatch()

    def announced(task_id: str) -> list[dict[str, Any]]:
        return [s for s in watch.seen if s.get("taskId") == task_id]

    async def until(check: Any) -> None:
        with anyio.fail_after(PUSHED_WITHIN_S):
            while not check():
                await anyio.sleep(0.02)

    async with (
        make_client(replica(pg_url), "2026") as a,
        make_client(replica(pg_url), "2026", extensions=[watch]) as b,
    ):
        ended = (await create(a, "2026", "slow_compute", {"seconds": 0, "label": "e"}))["taskId"]
        assert (await poll(a, ended))["status"] == "completed"
        asked = (await create(a, "2026", "confirm_delete", {"filename": "f"}))["taskId"]
        (key,) = (await poll(a, asked, until={"input_required"}))["inputRequests"]
        async with anyio.create_task_group() as tg:
            listen = {"notifications": {"taskIds": [asked, ended]}}
            tg.start_soon(raw, b, "subscriptions/listen", listen)
            # The task that ended before the listen is announced at once: b's stream is up.
            await until(lambda: bool(announced(ended)))
            # Only now does A's worker finish the other one: B can hear of it by push only.
            answer = {key: {"action": "accept", "content": {"confirm": True}}}
            await raw(a, "tasks/update", {"taskId": asked, "inputResponses": answer})
            await until(lambda: any(s["status"] == "completed" for s in announced(asked)))
            tg.cancel_scope.cancel()
    assert announced(asked)[-1]["result"]["content"][0]["text"] == "Deleted f"


async def test_2026_answer_on_b_wakes_worker_on_a(pg_url: str) -> None:
    async with make_client(replica(pg_url), "2026") as a, make_client(replica(pg_url), "2026") as b:
        task_id = (await create(a, "2026", "confirm_delete", {"filename": "f"}))["taskId"]
        with anyio.fail_after(PUSHED_WITHIN_S):
            while (got := await raw(b, "tasks/get", {"taskId": task_id}))[
                "status"
            ] != "input_required":
                await anyio.sleep(0.02)
        (key,) = got["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        await raw(b, "tasks/update", {"taskId": task_id, "inputResponses": answer})
        # A's parked worker wakes on the pushed answer (it would re-read only after 1 h).
        with anyio.fail_after(PUSHED_WITHIN_S):
            while (await raw(a, "tasks/get", {"taskId": task_id}))["status"] != "completed":
                await anyio.sleep(0.02)


async def test_2025_client_of_a_hears_cancel_answered_by_b(pg_url: str) -> None:
    seen: list[TaskStatusNotificationParams] = []

    async def on_status(params: TaskStatusNotificationParams) -> None:
        seen.append(params)

    class Watch(ClientExtension):
        identifier = "io.github.chit/test-status-watch"

        def notifications(self) -> list[NotificationBinding[Any]]:
            return [
                NotificationBinding(
                    method="notifications/tasks/status",
                    params_type=TaskStatusNotificationParams,
                    handler=on_status,
                )
            ]

    async with (
        make_client(replica(pg_url), "2025", extension=False, extensions=[Watch()]) as a,
        make_client(replica(pg_url), "2025") as b,
    ):
        task_id = (await create(a, "2025", "slow_compute", {"seconds": 60}))["taskId"]
        assert (await raw(b, "tasks/cancel", {"taskId": task_id}))["status"] == "cancelled"
        with anyio.fail_after(PUSHED_WITHIN_S):
            while not any(p.status == "cancelled" for p in seen):
                await anyio.sleep(0.02)
    assert {p.task_id for p in seen} == {task_id}
