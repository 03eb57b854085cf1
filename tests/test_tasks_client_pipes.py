"""A stdio server served on the event loop (``chit.tasks.client.pipes``), over real pipes.

``chit demo-server`` as the child: the session works as with the SDK's transport, a
request sent as JSON (:meth:`ServerPipes.request`) gets the server's JSON back and shows
in the protocol log, a caller that gives up sends the courtesy cancel, and a server that
dies fails the requests waiting on it instead of leaving them hanging. A 2025 task's
``tasks/get`` and ``tasks/result`` go this way.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from chit.proxy.wire import undeclare_extension
from chit.reconcile.protocol_log import ProtocolLog
from chit.tasks.client import TaskClient, TaskError, TaskHandle
from chit.tasks.client.pipes import ServerPipes
from tests.engine_support import demo_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _call(client: TaskClient, tool: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A stamped ``tools/call`` of the session, under an id of the session's counter."""
    data: dict[str, Any] = {
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    client.session._stamp(data, {})
    undeclare_extension(data["params"])  # a plain call, as a host without tasks sends it
    return client.session._dispatcher._allocate_id(), data["params"]  # type: ignore[attr-defined]


def _pipes(client: TaskClient) -> ServerPipes:
    assert client.pipes is not None, "a stdio server is served on the event loop"
    return client.pipes


async def test_a_request_sent_as_json_gets_the_servers_json(tmp_path: Path) -> None:
    log = ProtocolLog()
    async with TaskClient(demo_stdio(tmp_path / "d.db"), tap=log.tap("demo")) as client:
        assert "greet" in [t.name for t in await client.list_tools()]  # the SDK's path
        rid, params = _call(client, "greet", {"name": "Ada"})
        result = await _pipes(client).request(rid, "tools/call", params, 30)
        assert result["structuredContent"] == {"result": "Hello, Ada!"}
        assert "greet" in [t.name for t in await client.list_tools()]  # still in step
    assert client.pipes is None
    shown = [m for m in log.messages("demo", limit=1000) if m.id == str(rid)]
    assert [(m.direction, m.kind, m.method) for m in shown] == [
        ("sent", "request", "tools/call"),
        ("received", "response", None),
    ]
    assert "Hello, Ada!" in shown[1].text


async def test_a_caller_that_gives_up_cancels_the_request_on_the_server(tmp_path: Path) -> None:
    log = ProtocolLog()
    async with TaskClient(demo_stdio(tmp_path / "d.db"), tap=log.tap("demo")) as client:
        await client.list_tools()
        rid, params = _call(client, "slow_compute", {"seconds": 30})
        with anyio.move_on_after(0.5):
            await _pipes(client).request(rid, "tools/call", params, 60)
        rid2, params2 = _call(client, "greet", {"name": "Bo"})
        result = await _pipes(client).request(rid2, "tools/call", params2, 30)
        assert result["structuredContent"] == {"result": "Hello, Bo!"}
    sent = [m for m in log.messages("demo", limit=1000) if m.method == "notifications/cancelled"]
    assert len(sent) == 1 and f'"requestId": {rid}' in sent[0].text


async def test_a_server_that_dies_fails_the_waiting_request(tmp_path: Path) -> None:
    async with TaskClient(demo_stdio(tmp_path / "d.db")) as client:
        await client.list_tools()
        pipes = _pipes(client)
        rid, params = _call(client, "slow_compute", {"seconds": 60})
        caught: list[MCPError] = []

        async def wait() -> None:
            try:
                await pipes.request(rid, "tools/call", params, 120)
            except MCPError as exc:
                caught.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            with anyio.fail_after(30):
                while not pipes._calls:  # sent: waiting for the answer
                    await anyio.sleep(0.01)
            os.kill(pipes.proc.pid, signal.SIGKILL)
        assert caught and caught[0].error.code == CONNECTION_CLOSED
        with pytest.raises(MCPError) as again:
            rid, params = _call(client, "greet", {"name": "x"})
            await pipes.request(rid, "tools/call", params, 30)
        assert again.value.error.code == CONNECTION_CLOSED


async def test_2025_task_reads_go_on_the_pipes(tmp_path: Path) -> None:
    """``tasks/result`` and ``tasks/get`` of a 2025 task are sent as JSON (no SDK session
    round trip); their answers and errors are what the session's path gave."""
    async with TaskClient(demo_stdio(tmp_path / "d.db"), mode="legacy") as client:
        pipes = _pipes(client)
        sent: list[str] = []
        original = pipes.request

        async def counted(rid: int, method: str, params: Any, timeout: float) -> Any:
            sent.append(method)
            return await original(rid, method, params, timeout)

        pipes.request = counted  # type: ignore[method-assign]
        started = await client.start("slow_compute", {"seconds": 0.2}, request_key="k")
        assert isinstance(started, TaskHandle)
        outcome = await client.result(started.task_id)
        snap = await client.get(started.task_id)
        with pytest.raises(TaskError) as unknown:
            await client.get("no-such-task")
    assert outcome.status == "completed" and outcome.result is not None
    assert snap.status == "completed" and snap.task_id == started.task_id
    assert unknown.value.failure_class == "lost"
    assert sent == ["tasks/result", "tasks/get", "tasks/get"]
