"""TaskClient against chit's task server: hints, request-key retry, -32021, Mcp-Name."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from chit.demo.server import build_demo_server
from chit.tasks.client import (
    HttpServer,
    IncompatibleError,
    InProcessServer,
    Mode,
    TaskClient,
    TaskHandle,
    TransientError,
    TransportServer,
    modern,
)
from tests.fakes.dropping import DroppingTransport
from tests.interop_support import wait_listening
from tests.proc_support import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
CHIT = str(Path(sys.executable).with_name("chit"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Hints:
    def __init__(self) -> None:
        self.ids: list[str] = []

    async def __call__(self, task_id: str) -> None:
        self.ids.append(task_id)


@pytest.mark.parametrize("gen", ["2025", "2026"])
async def test_status_hints(gen: str, tmp_path: Path) -> None:
    hints = Hints()
    spec = InProcessServer(build_demo_server(tmp_path / "t.db"))
    mode: Mode = "legacy" if gen == "2025" else "2026"
    async with TaskClient(spec, mode=mode, read_timeout=10, on_hint=hints) as tc:
        handle = await tc.start("slow_compute", {"seconds": 0.5}, request_key="h")
        assert isinstance(handle, TaskHandle)
        async with tc.watch([handle.task_id, "not-a-task"]) as accepted:
            if gen == "2026":
                assert accepted == {handle.task_id}
            outcome = await tc.result(handle.task_id, timeout=20)
            assert outcome.status == "completed"
            with anyio.fail_after(30):
                while handle.task_id not in hints.ids:
                    await anyio.sleep(0.05)


@pytest.mark.parametrize("gen", ["2025", "2026"])
async def test_request_key_retry_after_dropped_reply(gen: str, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=CHIT, args=["demo-server", "--db", str(tmp_path / "t.db")]
    )
    dropper = DroppingTransport(stdio_client(params))
    mode: Mode = "legacy" if gen == "2025" else "2026"
    request_key = uuid.uuid4().hex
    async with TaskClient(TransportServer(dropper), mode=mode, read_timeout=20) as tc:
        tc.read_timeout = 2  # the create waits this long for its (dropped) reply
        with pytest.raises(TransientError):  # the reply was lost: outcome unknown
            await tc.start("slow_compute", {"seconds": 2}, request_key=request_key)
        (lost,) = dropper.dropped
        lost_id = lost["task"]["taskId"] if gen == "2025" else lost["taskId"]
        retried = await tc.start("slow_compute", {"seconds": 2}, request_key=request_key)
        assert isinstance(retried, TaskHandle) and retried.task_id == lost_id
        assert (await tc.result(retried.task_id, timeout=20)).status == "completed"


async def test_missing_extension_is_incompatible(tmp_path: Path) -> None:
    server = build_demo_server(tmp_path / "t.db")
    async with Client(server, mode="2026-07-28", read_timeout_seconds=5) as bare:
        with pytest.raises(IncompatibleError) as err:
            await modern.get(bare.session, "whatever")
        assert err.value.code == -32021
        with pytest.raises(IncompatibleError):
            await modern.create(bare.session, "failing_job", {}, {}, 5, _no_input)
    # and a 2026-only client pinned against a 2025-only server is refused at connect
    params = StdioServerParameters(command=sys.executable, args=[str(_BAD), "ok"])
    with pytest.raises(IncompatibleError):
        async with TaskClient(TransportServer(stdio_client(params)), mode="2026", read_timeout=3):
            pass


_BAD = Path(__file__).parent / "fakes" / "bad_server.py"


async def _no_input(key: str, request: Any) -> Any:
    raise AssertionError("no input expected")


class HeaderRecorder:
    """ASGI wrapper that records (Mcp-Method, Mcp-Name) of every POST."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str | None, str | None]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            self.seen.append((headers.get("mcp-method"), headers.get("mcp-name")))
        await self.app(scope, receive, send)


@pytest.fixture
def recorded_http(tmp_path: Path) -> Iterator[tuple[str, HeaderRecorder]]:
    import uvicorn

    server = build_demo_server(tmp_path / "t.db")
    recorder = HeaderRecorder(server.streamable_http_app(host="127.0.0.1"))
    port = free_port()
    config = uvicorn.Config(recorder, host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not uv.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", recorder
    finally:
        uv.should_exit = True
        thread.join(timeout=10)


@pytest.mark.parametrize("gen", ["2025", "2026"])
async def test_mcp_name_header_on_tasks_methods(
    gen: str, recorded_http: tuple[str, HeaderRecorder]
) -> None:
    url, recorder = recorded_http
    mode: Mode = "legacy" if gen == "2025" else "2026"
    async with TaskClient(HttpServer(url), mode=mode, read_timeout=10) as tc:
        handle = await tc.start("slow_compute", {"seconds": 0.1}, request_key="n")
        assert isinstance(handle, TaskHandle)
        await tc.get(handle.task_id)
        await tc.result(handle.task_id, timeout=20)
        await tc.cancel(handle.task_id)
    task_frames = [(m, n) for m, n in recorder.seen if n == handle.task_id]
    if gen == "2026":  # Mcp-Method is a 2026 header; every tasks/* frame names the task
        assert {n for m, n in recorder.seen if m and m.startswith("tasks/")} == {handle.task_id}
        assert {m for m, _ in task_frames} >= {"tasks/get", "tasks/cancel"}
    else:  # 2025: no Mcp-Method, but Mcp-Name on get, result and cancel (and nothing else)
        assert {n for _, n in recorder.seen if n} == {handle.task_id}
        assert len(task_frames) >= 3


def test_wait_listening_helper_is_importable() -> None:
    assert callable(wait_listening)
