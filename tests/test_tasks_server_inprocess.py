"""Task server, in process, both generations: lifecycle, errors, input, cancel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from chit.demo.server import build_demo_server
from tests.tasks_server_support import TaskWatch, create, make_client, poll, raw, store_target

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The demo server on each task store (the same behaviour is asserted on both)."""
    return build_demo_server(store_target(request, tmp_path))


@pytest.fixture
async def c26(server: Any) -> AsyncIterator[Any]:
    async with make_client(server, "2026") as client:
        yield client


async def accept_confirm(context: Any, params: Any) -> ElicitResult:
    """Elicitation callback: accept every 2025 elicitation with confirm=true."""
    accept_confirm.seen.append(params)  # type: ignore[attr-defined]
    return ElicitResult(action="accept", content={"confirm": True, "name": "Ada"})


accept_confirm.seen = []  # type: ignore[attr-defined]


# --- 2026 ------------------------------------------------------------------------------


async def test_2026_create_poll_result(c26: Any) -> None:
    created = await create(c26, "2026", "slow_compute", {"seconds": 0.2, "label": "x"})
    assert len(created["taskId"]) >= 32 and created["ttlMs"] == 86_400_000
    assert "ttl" not in created and created["pollIntervalMs"] > 0
    done = await poll(c26, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Computed x in 0.2 s"


async def test_2026_tool_error_is_completed_and_protocol_error_failed(c26: Any) -> None:
    tool_err = await poll(c26, (await create(c26, "2026", "failing_job", {}))["taskId"])
    assert tool_err["status"] == "completed" and tool_err["result"]["isError"] is True
    proto = await poll(c26, (await create(c26, "2026", "protocol_error_job", {}))["taskId"])
    assert (
        proto["status"] == "failed" and proto["error"]["code"] == -32603 and "result" not in proto
    )


async def test_2026_input_required_partial_then_complete(c26: Any) -> None:
    task_id = (await create(c26, "2026", "multi_input", {}))["taskId"]
    waiting = await poll(c26, task_id, until={"input_required"})
    assert set(waiting["inputRequests"]) == {"name", "confirm"}
    assert waiting["inputRequests"]["name"]["method"] == "elicitation/create"
    ack = await raw(
        c26,
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        },
    )
    assert ack["resultType"] == "complete" and "taskId" not in ack
    still = await raw(c26, "tasks/get", {"taskId": task_id})
    assert still["status"] == "input_required" and list(still["inputRequests"]) == ["confirm"]
    await raw(
        c26,
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {
                "confirm": {"action": "accept", "content": {"confirm": True}},
                "bogus": {},
            },
        },
    )
    done = await poll(c26, task_id)
    assert done["result"]["content"][0]["text"] == "Report for Ada written (published)"


async def test_2026_cancel_running_then_terminal_is_idempotent(c26: Any) -> None:
    task_id = (await create(c26, "2026", "slow_compute", {"seconds": 30}))["taskId"]
    ack = await raw(c26, "tasks/cancel", {"taskId": task_id})
    assert ack["resultType"] == "complete" and "status" not in ack
    assert (await poll(c26, task_id))["status"] == "cancelled"
    again = await raw(c26, "tasks/cancel", {"taskId": task_id})
    assert again["resultType"] == "complete"


async def test_2026_unknown_id_and_removed_methods(c26: Any) -> None:
    with pytest.raises(MCPError) as err:
        await raw(c26, "tasks/get", {"taskId": "no-such-task"})
    assert err.value.error.code == -32602
    for method in ("tasks/result", "tasks/list"):
        with pytest.raises(MCPError) as err:
            await raw(c26, method, {"taskId": "x"})
        assert err.value.error.code == -32601


async def test_2026_without_extension(server: Any) -> None:
    async with make_client(server, "2026", extension=False) as client:
        with pytest.raises(MCPError) as err:
            await raw(client, "tools/call", {"name": "failing_job", "arguments": {}})
        assert err.value.error.code == -32021
        assert (
            "io.modelcontextprotocol/tasks"
            in err.value.error.data["requiredCapabilities"]["extensions"]
        )
        plain = await raw(
            client, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}
        )
        assert plain["content"][0]["text"].startswith("Computed") and "taskId" not in plain
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/get", {"taskId": "x"})
        assert err.value.error.code == -32021


# --- 2025-11-25 ----------------------------------------------------------------------


async def test_2025_capability_support_and_result(server: Any) -> None:
    async with make_client(server, "2025") as client:
        assert client.protocol_version == "2025-11-25"
        tasks_cap = client.server_capabilities.tasks
        assert tasks_cap is not None and tasks_cap.requests is not None
        tools = {t.name: t for t in (await client.list_tools()).tools}
        failing, slow = tools["failing_job"].execution, tools["slow_compute"].execution
        assert failing is not None and failing.task_support == "required"
        assert slow is not None and slow.task_support == "optional"
        assert tools["greet"].execution is None
        created = await create(client, "2025", "slow_compute", {"seconds": 0.2, "label": "y"})
        assert (
            created["status"] == "working" and created["ttl"] == 120_000 and "ttlMs" not in created
        )
        result = await raw(client, "tasks/result", {"taskId": created["taskId"]})
        assert result["content"][0]["text"] == "Computed y in 0.2 s"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {
            "taskId": created["taskId"]
        }
        got = await raw(client, "tasks/get", {"taskId": created["taskId"]})
        assert got["status"] == "completed" and "result" not in got
        listed = await raw(client, "tasks/list", {})
        assert created["taskId"] in [t["taskId"] for t in listed["tasks"]]


async def test_2025_task_support_enforced(server: Any) -> None:
    async with make_client(server, "2025") as client:
        with pytest.raises(MCPError) as err:
            await raw(client, "tools/call", {"name": "failing_job", "arguments": {}})
        assert err.value.error.code == -32601
        with pytest.raises(MCPError) as err:
            await raw(client, "tools/call", {"name": "greet", "arguments": {}, "task": {}})
        assert err.value.error.code == -32601
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/update", {"taskId": "x", "inputResponses": {}})
        assert err.value.error.code == -32601


async def test_2025_tool_error_fails_task_and_result_is_the_tool_result(server: Any) -> None:
    async with make_client(server, "2025") as client:
        created = await create(client, "2025", "failing_job", {})
        result = await raw(client, "tasks/result", {"taskId": created["taskId"]})
        assert result["isError"] is True
        assert (await raw(client, "tasks/get", {"taskId": created["taskId"]}))["status"] == "failed"
        created = await create(client, "2025", "protocol_error_job", {})
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/result", {"taskId": created["taskId"]})
        assert err.value.error.code == -32603


async def test_2025_elicitation_on_tasks_result(server: Any) -> None:
    accept_confirm.seen.clear()  # type: ignore[attr-defined]
    async with make_client(server, "2025", elicitation_callback=accept_confirm) as client:
        created = await create(client, "2025", "confirm_delete", {"filename": "a.txt"})
        await poll(client, created["taskId"], until={"input_required"})
        result = await raw(client, "tasks/result", {"taskId": created["taskId"]})
        assert result["content"][0]["text"] == "Deleted a.txt"
        (params,) = accept_confirm.seen  # type: ignore[attr-defined]
        assert params.meta["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}


async def test_2025_cancel_then_cancel_terminal_is_rejected(server: Any) -> None:
    async with make_client(server, "2025") as client:
        created = await create(client, "2025", "slow_compute", {"seconds": 30})
        cancelled = await raw(client, "tasks/cancel", {"taskId": created["taskId"]})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == created["taskId"]
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/cancel", {"taskId": created["taskId"]})
        assert err.value.error.code == -32602
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/get", {"taskId": "unknown"})
        assert err.value.error.code == -32602


async def test_2025_status_notifications(server: Any) -> None:
    from mcp.client.extension import ClientExtension, NotificationBinding
    from mcp_types import TaskStatusNotificationParams

    seen: list[TaskStatusNotificationParams] = []
    completed = anyio.Event()

    async def on_status(params: TaskStatusNotificationParams) -> None:
        seen.append(params)
        if params.status == "completed":
            completed.set()

    class Watch(ClientExtension):
        identifier = "io.github.chit/test-watch"

        def notifications(self) -> list[NotificationBinding[Any]]:
            return [
                NotificationBinding(
                    method="notifications/tasks/status",
                    params_type=TaskStatusNotificationParams,
                    handler=on_status,
                )
            ]

    async with make_client(server, "2025", extension=False, extensions=[Watch()]) as client:
        created = await create(client, "2025", "slow_compute", {"seconds": 0.2})
        await raw(client, "tasks/result", {"taskId": created["taskId"]})
        with anyio.fail_after(10):
            await completed.wait()
    assert {p.task_id for p in seen} == {created["taskId"]}
    assert seen[-1].status == "completed"


async def test_2025_progress_token_lives_with_the_task(server: Any) -> None:
    from mcp_types import ProgressNotification

    seen: list[Any] = []
    finished = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ProgressNotification):
            seen.append(message.params)
            if message.params.total is not None and message.params.progress >= message.params.total:
                finished.set()  # slow_compute's last report: "finishing", steps of steps

    async with make_client(server, "2025", message_handler=on_message) as client:
        params = {
            "name": "slow_compute",
            "arguments": {"seconds": 1},
            "task": {},
            "_meta": {"progressToken": "tok-9"},
        }
        created = (await raw(client, "tools/call", params))["task"]
        await raw(client, "tasks/result", {"taskId": created["taskId"]})
        with anyio.fail_after(10):
            await finished.wait()
    values = [p.progress for p in seen]
    assert len(values) >= 3 and values == sorted(set(values))
    assert {p.progress_token for p in seen} == {"tok-9"}
    assert seen[0].meta["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}


async def test_2026_listen_for_task_notifications(server: Any) -> None:
    watch = TaskWatch()
    seen = watch.seen
    async with make_client(server, "2026", extensions=[watch]) as client:
        task_id = (await create(client, "2026", "slow_compute", {"seconds": 1.0, "label": "push"}))[
            "taskId"
        ]
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                await raw(
                    client,
                    "subscriptions/listen",
                    {"notifications": {"taskIds": [task_id, "bogus"]}},
                )

            tg.start_soon(listen)
            await poll(client, task_id)
            with anyio.fail_after(30):
                while not any(s.get("status") == "completed" for s in seen):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    final = next(s for s in seen if s.get("status") == "completed")
    assert (
        final["taskId"] == task_id
        and final["result"]["content"][0]["text"] == "Computed push in 1 s"
    )
    async with make_client(server, "2026", extension=False) as plain:
        with pytest.raises(MCPError) as err:
            await raw(plain, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
        assert err.value.error.code == -32021
