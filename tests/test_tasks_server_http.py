"""Task server over streamable HTTP (``chit demo-server --http`` subprocess)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from tests.tasks_server_support import create, make_client, poll, raw, start_http_server, stop

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("http")
    proc, address = start_http_server(tmp / "tasks.db", tmp)
    try:
        yield address
    finally:
        stop(proc)


async def test_2026_over_http(url: str) -> None:
    async with make_client(url, "2026") as c:
        assert c.protocol_version == "2026-07-28"
        task_id = (await create(c, "2026", "confirm_delete", {"filename": "h.txt"}))["taskId"]
        waiting = await poll(c, task_id, until={"input_required"})
        (key,) = waiting["inputRequests"]
        await raw(
            c,
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
            },
        )
        assert (await poll(c, task_id))["result"]["content"][0]["text"] == "Deleted h.txt"
        slow = (await create(c, "2026", "slow_compute", {"seconds": 30}))["taskId"]
        await raw(c, "tasks/cancel", {"taskId": slow})
        assert (await poll(c, slow))["status"] == "cancelled"
    # 2026 is sessionless: a brand-new client can poll the same task by id.
    async with make_client(url, "2026") as other:
        assert (await raw(other, "tasks/get", {"taskId": task_id}))["status"] == "completed"


async def test_2026_mcp_name_mismatch_is_rejected(url: str) -> None:
    async with make_client(url, "2026") as c:
        task_id = (await create(c, "2026", "slow_compute", {"seconds": 0}))["taskId"]
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tasks/get",
        "params": {
            "taskId": task_id,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": {"io.modelcontextprotocol/tasks": {}}
                },
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tasks/get",
        "Mcp-Name": "some-other-task",
    }
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    request.add_header("Content-Type", "application/json")

    def post() -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, payload = await anyio.to_thread.run_sync(post)
    assert status == 400
    assert payload["error"]["code"] == -32020


async def test_2025_over_http(url: str) -> None:
    seen: list[Any] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"confirm": False})

    async with make_client(url, "2025", elicitation_callback=answer) as c:
        assert c.protocol_version == "2025-11-25"
        created = await create(c, "2025", "confirm_delete", {"filename": "k.txt"})
        result = await raw(c, "tasks/result", {"taskId": created["taskId"]})
        assert result["content"][0]["text"] == "Kept k.txt: deletion not confirmed"
        assert (
            seen
            and seen[0].meta["io.modelcontextprotocol/related-task"]["taskId"] == created["taskId"]
        )
        slow = await create(c, "2025", "slow_compute", {"seconds": 30})
        assert (await raw(c, "tasks/cancel", {"taskId": slow["taskId"]}))["status"] == "cancelled"
        with pytest.raises(MCPError) as err:
            await raw(c, "tasks/cancel", {"taskId": slow["taskId"]})
        assert err.value.error.code == -32602
