"""TaskClient against @modelcontextprotocol/server-everything (2025-11-25 core tasks).

Runs over stdio and streamable HTTP. The server's only task tool,
``simulate-research-query`` (taskSupport ``required``), goes through four ~1 s stages;
``ambiguous: true`` makes it elicit a clarification through ``tasks/result``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from mcp_types import ElicitRequest, ElicitResult, ErrorData, InputRequest, InputResponse

from chit.tasks.client import (
    HttpServer,
    LostError,
    StdioServer,
    SyncReason,
    SyncResult,
    TaskClient,
    TaskHandle,
)
from tests.interop_support import everything_entry, everything_http, require_npm

pytestmark = [pytest.mark.interop, pytest.mark.anyio, pytest.mark.timeout(120)]
TOOL = "simulate-research-query"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_npm()
    log = tmp_path_factory.mktemp("everything") / "server.log"
    with everything_http(log) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Recorder:
    """Collects status hints and elicitations."""

    def __init__(self) -> None:
        self.hints: list[str] = []
        self.inputs: list[tuple[str | None, InputRequest]] = []

    async def on_hint(self, task_id: str) -> None:
        self.hints.append(task_id)

    async def on_input(
        self, task_id: str | None, request: InputRequest
    ) -> InputResponse | ErrorData:
        self.inputs.append((task_id, request))
        return ElicitResult(action="accept", content={"interpretation": "technical"})


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
async def tc(
    transport: str, rec: Recorder, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TaskClient]:
    require_npm()
    if transport == "stdio":
        stderr = open(tmp_path / "stderr.log", "w")  # noqa: SIM115 - closed after the client
        spec: StdioServer | HttpServer = StdioServer(
            "node", [str(everything_entry()), "stdio"], stderr=stderr
        )
    else:
        stderr = None
        spec = HttpServer(request.getfixturevalue("http_url"))
    async with TaskClient(spec, read_timeout=10, result_timeout=60, on_hint=rec.on_hint) as client:
        yield client
    if stderr is not None:
        stderr.close()


def key() -> str:
    return uuid.uuid4().hex


async def test_discovery(tc: TaskClient) -> None:
    summary = tc.server_summary()
    assert summary.protocol_version == "2025-11-25"
    assert summary.generation == "2025-11-25" and summary.tasks_supported
    assert summary.name == "mcp-servers/everything"
    support = {t.name: t.task_support for t in await tc.list_tools()}
    assert support[TOOL] == "required"
    assert support["echo"] == "forbidden"


async def test_create_poll_result_and_hints(tc: TaskClient, rec: Recorder) -> None:
    started = await tc.start(TOOL, {"topic": "tides"}, request_key=key(), ttl_ms=1000)
    assert isinstance(started, TaskHandle)
    assert started.generation == "2025-11-25" and started.status == "working"
    assert started.ttl_ms == 300000  # the server overrides the requested ttl
    assert started.poll_interval_ms == 1000
    seen = []
    with anyio.fail_after(30):
        while True:
            snap = await tc.get(started.task_id)
            seen.append(snap.status)
            if snap.terminal:
                break
            await anyio.sleep((snap.poll_interval_ms or 1000) / 2000)
    assert seen[-1] == "completed" and "working" in seen
    assert snap.updated_at >= snap.created_at
    outcome = await tc.result(started.task_id)
    assert outcome.status == "completed" and not outcome.is_error
    assert outcome.result is not None and "Research Report: tides" in str(outcome.result.content)
    assert started.task_id in rec.hints


async def test_elicitation_routed_by_task(tc: TaskClient, rec: Recorder) -> None:
    started = await tc.start(TOOL, {"topic": "bass", "ambiguous": True}, request_key=key())
    assert isinstance(started, TaskHandle)
    with anyio.fail_after(20):
        while (snap := await tc.get(started.task_id)).status != "input_required":
            assert not snap.terminal
            await anyio.sleep(0.2)
    outcome = await tc.result(started.task_id, on_input=rec.on_input)
    assert outcome.status == "completed"
    assert len(rec.inputs) == 1
    task_id, request = rec.inputs[0]
    assert task_id == started.task_id and isinstance(request, ElicitRequest)
    assert outcome.result is not None and "(technical)" in str(outcome.result.content)


async def test_cancel_then_already_terminal(tc: TaskClient) -> None:
    started = await tc.start(TOOL, {"topic": "kelp"}, request_key=key())
    assert isinstance(started, TaskHandle)
    first = await tc.cancel(started.task_id)
    assert first.kind == "cancelled"
    assert first.snapshot is not None and first.snapshot.status == "cancelled"
    second = await tc.cancel(started.task_id)
    assert second.kind == "already_terminal"
    assert second.snapshot is not None and second.snapshot.status == "cancelled"
    # server-everything has no stored result for a cancelled task: a typed outcome, no raise
    outcome = await tc.result(started.task_id)
    assert outcome.status == "cancelled" and outcome.error is not None


async def test_unknown_task_is_lost(tc: TaskClient) -> None:
    for op in (tc.get, tc.cancel, tc.result):
        with pytest.raises(LostError) as info:
            await op("0" * 32)
        assert info.value.failure_class == "lost" and info.value.code == -32602


async def test_forbidden_tool_runs_synchronously(tc: TaskClient) -> None:
    started = await tc.start("echo", {"message": "hi"}, request_key=key())
    assert isinstance(started, SyncResult)
    assert started.reason is SyncReason.TOOL_FORBIDS_TASKS
    assert "hi" in str(started.result.content)
