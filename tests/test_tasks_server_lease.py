"""The heartbeat lease across machines: a replica that stops beating loses its tasks.

Replicas on other hosts cannot be checked by pid, only by their heartbeat. Replica A
(its host identity set to another machine) stops without releasing anything — as a
crash or a network partition looks from outside — and replica B, once A's heartbeat is
older than the lease, fails A's non-resumable task with -32603 and resumes the
resumable one.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from chit.demo.fixtures import register_plain_tools, register_task_tools
from chit.tasks.server import TaskRuntime, build_server
from tests.tasks_server_support import create, make_client, poll

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
HEARTBEAT_S = 0.2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def replica(url: str) -> tuple[TaskRuntime, Any]:
    runtime = TaskRuntime(url, heartbeat_s=HEARTBEAT_S)
    register_task_tools(runtime)
    server = build_server("replica", runtime)
    register_plain_tools(server)
    return runtime, server


async def test_stale_heartbeat_of_a_remote_replica_fails_or_resumes_its_tasks(
    pg_url: str,
) -> None:
    runtime_a, server_a = replica(pg_url)
    runtime_a.ownership.host = "another-machine"  # no pid check possible: only the lease
    runtime_a.store.release = lambda *_: None  # type: ignore[method-assign]  # a crash
    runtime_b, server_b = replica(pg_url)
    lease_s = runtime_b.ownership.stale_s
    async with make_client(server_b, "2026") as b:
        async with make_client(server_a, "2026") as a:
            plain = await create(a, "2026", "slow_compute", {"seconds": 60, "label": "x"})
            again = await create(a, "2026", "resumable_job", {"seconds": 0.2})
            await poll(a, again["taskId"], until={"working"})
        stopped = time.monotonic()  # A's lifespan ended: no heartbeat, nothing released
        failed = await poll(b, plain["taskId"], timeout=30)
        took = time.monotonic() - stopped
        assert failed["status"] == "failed" and failed["error"]["code"] == -32603
        assert (await poll(b, again["taskId"], timeout=30))["status"] == "completed"
    print(f"failed {took:.2f} s after A stopped (lease {lease_s:.1f} s)")
