"""The PostgreSQL server goes away under a running replica, then comes back.

Requests meanwhile get a one-line JSON-RPC -32603 ("Task store unavailable: …") instead
of hanging or crashing the replica; once the server is back the replica answers again,
the change feed reconnects, and a task acknowledged before the outage still completes
(its worker's outcome write waits for the store): no acknowledged write is lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from chit.demo.server import build_demo_server
from tests.pg_support import Cluster, new_cluster, remove_cluster
from tests.tasks_server_support import create, make_client, poll, raw

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: the test stops and restarts it."""
    own = new_cluster()
    try:
        yield own
    finally:
        remove_cluster(own)


async def until_ok(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            try:
                return await raw(client, method, params)
            except MCPError:
                await anyio.sleep(0.2)


async def test_outage_gives_one_line_errors_then_recovers(cluster: Cluster) -> None:
    server = build_demo_server(cluster.url, heartbeat_s=0.5)
    async with make_client(server, "2026") as client:
        acked = await create(client, "2026", "slow_compute", {"seconds": 2, "label": "o"})
        await anyio.to_thread.run_sync(cluster.stop, "fast")
        errors: list[MCPError] = []
        for method, params in (
            ("tasks/get", {"taskId": acked["taskId"]}),
            ("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}),
        ):
            with pytest.raises(MCPError) as caught:
                await raw(client, method, params)
            errors.append(caught.value)
        for error in errors:
            assert error.error.code == -32603
            assert error.error.message.startswith("Task store unavailable: ")
            assert "\n" not in error.error.message
        await anyio.to_thread.run_sync(cluster.start)
        # Back: the acknowledged task completes (its outcome write waited), new work runs.
        await until_ok(client, "tasks/get", {"taskId": acked["taskId"]})
        done = await poll(client, acked["taskId"], timeout=60)
        assert done["status"] == "completed", done
        again = await create(client, "2026", "slow_compute", {"seconds": 0.1, "label": "n"})
        assert (await poll(client, again["taskId"]))["status"] == "completed"
