"""TaskClient against chit's own task server (``chit demo-server``), both generations.

Transports: in-process (``build_demo_server``), stdio (``chit demo-server``) and
streamable HTTP (``chit demo-server --http``). Generations: 2025-11-25 core tasks
(``mode="legacy"``) and the 2026-07-28 extension (``mode="2026"``).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import ElicitRequest, ElicitResult, ErrorData, InputRequest, InputResponse

from chit.demo.server import build_demo_server
from chit.tasks.client import (
    HttpServer,
    InProcessServer,
    LostError,
    Mode,
    ServerSpec,
    StdioServer,
    SyncReason,
    SyncResult,
    TaskClient,
    TaskHandle,
)
from tests.interop_support import http_server
from tests.proc_support import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
CHIT = str(Path(sys.executable).with_name("chit"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("demo-http")
    port = free_port()
    argv = [CHIT, "demo-server", "--http", f"127.0.0.1:{port}", "--db", str(tmp / "tasks.db")]
    with http_server(argv, port, log=tmp / "server.log"):
        yield f"http://127.0.0.1:{port}/mcp"


def spec_for(transport: str, tmp: Path, request: pytest.FixtureRequest) -> ServerSpec:
    if transport == "inproc":
        return InProcessServer(build_demo_server(tmp / "tasks.db"))
    if transport == "stdio":
        return StdioServer(CHIT, ["demo-server", "--db", str(tmp / "tasks.db")])
    return HttpServer(request.getfixturevalue("http_url"))


@pytest.fixture(params=["inproc", "stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["2025", "2026"])
def gen(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Answers:
    """Input handler recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, InputRequest]] = []

    async def __call__(
        self, task_id: str | None, request: InputRequest
    ) -> InputResponse | ErrorData:
        self.asked.append((task_id, request))
        return ElicitResult(action="accept", content={"confirm": True, "name": "Ada"})


@pytest.fixture
async def tc(
    transport: str, gen: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TaskClient]:
    spec = spec_for(transport, tmp_path, request)
    mode: Mode = "legacy" if gen == "2025" else "2026"
    async with TaskClient(spec, mode=mode, read_timeout=10, result_timeout=30) as client:
        assert client.generation == ("2025-11-25" if gen == "2025" else "2026-07-28")
        yield client


def key() -> str:
    return uuid.uuid4().hex


async def start_task(tc: TaskClient, tool: str, args: dict[str, Any]) -> TaskHandle:
    started = await tc.start(tool, args, request_key=key())
    assert isinstance(started, TaskHandle), started
    return started


async def test_lifecycle_and_result(tc: TaskClient) -> None:
    handle = await start_task(tc, "slow_compute", {"seconds": 0.2, "label": "x"})
    assert handle.generation == tc.generation and handle.status == "working"
    assert handle.poll_interval_ms and handle.ttl_ms
    outcome = await tc.result(handle.task_id)
    assert outcome.status == "completed" and not outcome.is_error
    assert outcome.result is not None and outcome.result.content[0].text == "Computed x in 0.2 s"  # type: ignore[union-attr]
    snap = await tc.get(handle.task_id)
    assert snap.status == "completed"
    if tc.generation == "2026-07-28":
        assert snap.result is not None  # inline on 2026


async def test_is_error_semantics(tc: TaskClient) -> None:
    tool_err = await tc.result((await start_task(tc, "failing_job", {})).task_id)
    # 2026: a tool error is a completed task with isError; 2025: the task is failed.
    assert tool_err.status == ("failed" if tc.generation == "2025-11-25" else "completed")
    assert tool_err.result is not None and tool_err.result.is_error and tool_err.is_error
    proto = await tc.result((await start_task(tc, "protocol_error_job", {})).task_id)
    assert proto.status == "failed" and proto.error is not None and proto.error.code == -32603


async def test_input_required(tc: TaskClient) -> None:
    answers = Answers()
    if tc.generation == "2025-11-25":
        handle = await start_task(tc, "confirm_delete", {"filename": "a.txt"})
        outcome = await tc.result(handle.task_id, on_input=answers)
        assert outcome.result is not None and outcome.result.content[0].text == "Deleted a.txt"  # type: ignore[union-attr]
        ((task_id, request),) = answers.asked
        assert task_id == handle.task_id and isinstance(request, ElicitRequest)
        return
    handle = await start_task(tc, "multi_input", {})
    with anyio.fail_after(10):
        while (snap := await tc.get(handle.task_id)).status != "input_required":
            await anyio.sleep(0.05)
    assert set(snap.input_requests) == {"name", "confirm"} == snap.new_input_keys
    again = await tc.get(handle.task_id)
    assert again.new_input_keys == frozenset()  # deduped across polls
    await tc.answer(
        handle.task_id, {"name": ElicitResult(action="accept", content={"name": "Ada"})}
    )
    with anyio.fail_after(10):
        while set((snap := await tc.get(handle.task_id)).input_requests) != {"confirm"}:
            await anyio.sleep(0.05)
    assert snap.status == "input_required"
    outcome = await tc.result(handle.task_id, on_input=answers)
    assert outcome.result is not None
    assert outcome.result.content[0].text == "Report for Ada written (published)"  # type: ignore[union-attr]
    # only "confirm" was still unanswered
    assert [(t, r.params.message) for t, r in answers.asked] == [  # type: ignore[union-attr]
        (handle.task_id, "Publish the report when done?")
    ]


async def test_cancel(tc: TaskClient) -> None:
    handle = await start_task(tc, "slow_compute", {"seconds": 30})
    first = await tc.cancel(handle.task_id)
    if tc.generation == "2025-11-25":
        assert first.kind == "cancelled" and first.snapshot and first.snapshot.status == "cancelled"
        second = await tc.cancel(handle.task_id)
        assert second.kind == "already_terminal"
        return
    assert first.kind == "acknowledged" and first.snapshot is None
    outcome = await tc.result(handle.task_id, timeout=10)
    assert outcome.status == "cancelled"
    assert (await tc.cancel(handle.task_id)).kind == "acknowledged"  # idempotent ack


async def test_unknown_task_is_lost(tc: TaskClient) -> None:
    with pytest.raises(LostError):
        await tc.get("no-such-task")
    with pytest.raises(LostError):
        await tc.cancel("no-such-task")


async def test_plain_tool_is_synchronous(tc: TaskClient) -> None:
    started = await tc.start("greet", {"name": "Bo"}, request_key=key())
    assert isinstance(started, SyncResult)
    expected = (
        SyncReason.TOOL_FORBIDS_TASKS
        if tc.generation == "2025-11-25"
        else SyncReason.SERVER_CHOSE_SYNC
    )
    assert started.reason is expected
    assert started.result.content[0].text == "Hello, Bo!"  # type: ignore[union-attr]
    tools = {t.name: t.task_support for t in await tc.list_tools()}
    assert tools["slow_compute"] == "optional"
    if tc.generation == "2025-11-25":
        assert tools["failing_job"] == "required" and tools["greet"] == "forbidden"


async def test_request_key_makes_start_idempotent(tc: TaskClient) -> None:
    k = key()
    first = await tc.start("slow_compute", {"seconds": 5}, request_key=k)
    second = await tc.start("slow_compute", {"seconds": 5}, request_key=k)
    assert isinstance(first, TaskHandle) and isinstance(second, TaskHandle)
    assert first.task_id == second.task_id
    await tc.cancel(first.task_id)
