"""Task server durability: request keys, TTL, size cap, principals, restarts (stdio)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from chit.demo.server import build_demo_server
from tests.tasks_server_support import (
    PYTHON,
    create,
    demo_env,
    make_client,
    poll,
    raw,
    start_http_server,
    stop,
    store_target,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
KEY = "io.github.chit/request-key"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """A settable clock for TTL tests."""

    def __init__(self) -> None:
        self.moment = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
async def client(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[Any]:
    target = store_target(request, tmp_path)
    server = build_demo_server(target, now=clock, max_argument_bytes=4096)
    async with make_client(server, "2026") as c:
        yield c


async def test_request_key_retry_returns_same_task_and_one_execution(client: Any) -> None:
    first = await create(
        client, "2026", "slow_compute", {"seconds": 0.1, "label": "k"}, **{KEY: "key-1"}
    )
    # The reply "was lost": the client retries the identical call with the same key.
    again = await create(
        client, "2026", "slow_compute", {"seconds": 0.1, "label": "k"}, **{KEY: "key-1"}
    )
    assert again["taskId"] == first["taskId"]
    done = await poll(client, first["taskId"])
    later = await create(
        client, "2026", "slow_compute", {"seconds": 0.1, "label": "k"}, **{KEY: "key-1"}
    )
    assert later["taskId"] == first["taskId"] and later["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Computed k in 0.1 s"
    # A different key is a different request.
    other = await create(
        client, "2026", "slow_compute", {"seconds": 0.1, "label": "k"}, **{KEY: "key-2"}
    )
    assert other["taskId"] != first["taskId"]


async def test_request_key_with_different_arguments_is_rejected(client: Any) -> None:
    await create(client, "2026", "slow_compute", {"seconds": 0.1, "label": "a"}, **{KEY: "key-x"})
    with pytest.raises(MCPError) as err:
        await create(
            client, "2026", "slow_compute", {"seconds": 0.1, "label": "b"}, **{KEY: "key-x"}
        )
    assert err.value.error.code == -32602 and "arguments differ" in err.value.error.message


async def test_expired_task_is_not_found_and_keyed_retry_renews(client: Any, clock: Clock) -> None:
    plain = await create(client, "2026", "slow_compute", {"seconds": 0})
    keyed = await create(client, "2026", "slow_compute", {"seconds": 0}, **{KEY: "renew-me"})
    await poll(client, keyed["taskId"])
    clock.moment += timedelta(days=2)
    for task_id in (plain["taskId"], keyed["taskId"]):
        with pytest.raises(MCPError) as err:
            await raw(client, "tasks/get", {"taskId": task_id})
        assert err.value.error.code == -32602
    renewed = await create(client, "2026", "slow_compute", {"seconds": 0}, **{KEY: "renew-me"})
    assert renewed["taskId"] == keyed["taskId"] and renewed["status"] == "completed"
    assert renewed["ttlMs"] > 2 * 86_400_000  # lifetime counted from the original creation
    assert (await raw(client, "tasks/get", {"taskId": keyed["taskId"]}))["status"] == "completed"


async def test_argument_size_cap(client: Any) -> None:
    with pytest.raises(MCPError) as err:
        await create(client, "2026", "slow_compute", {"seconds": 0, "label": "x" * 5000})
    assert err.value.error.code == -32602 and "too large" in err.value.error.message


async def test_ttl_clamped(tmp_path: Path) -> None:
    server = build_demo_server(tmp_path / "t.db")
    async with make_client(server, "2025") as c:
        short = await create(c, "2025", "slow_compute", {"seconds": 0}, ttl=5)
        assert short["ttl"] == 60_000
        long = await create(c, "2025", "slow_compute", {"seconds": 0}, ttl=10**12)
        assert long["ttl"] == 7 * 86_400_000


async def test_foreign_principal_answers_like_unknown(tmp_path: Path) -> None:
    from chit.demo.fixtures import register_task_tools
    from chit.tasks.server import TaskRuntime, build_server

    who = {"principal": "alice"}
    runtime = TaskRuntime(tmp_path / "p.db")
    register_task_tools(runtime)
    server = build_server("p", runtime, principal_of=lambda ctx: who["principal"])
    async with make_client(server, "2026") as c:
        task_id = (await create(c, "2026", "slow_compute", {"seconds": 0}))["taskId"]
        await poll(c, task_id)
        who["principal"] = "mallory"
        errors = []
        for target in (task_id, "does-not-exist"):
            with pytest.raises(MCPError) as err:
                await raw(c, "tasks/get", {"taskId": target})
            errors.append(err.value.error.model_dump())
        assert errors[0] == errors[1]


def stdio_params(db: Path, tmp: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "demo-server", "--db", str(db)], env=demo_env(tmp)
    )


@pytest.mark.parametrize("generation", ["2025", "2026"])
async def test_restart_between_create_and_get(tmp_path: Path, generation: str) -> None:
    db = tmp_path / "restart.db"
    params = stdio_params(db, tmp_path)
    async with make_client(params, generation) as c:
        done = await create(c, generation, "slow_compute", {"seconds": 0.1}, **{KEY: "r-1"})
        await poll(c, done["taskId"])
        running = await create(c, generation, "slow_compute", {"seconds": 60}, **{KEY: "r-2"})
        resumable = await create(c, generation, "resumable_job", {"seconds": 0.5})
    # Leaving the context closed stdin: the server process is gone with its workers.
    async with make_client(params, generation) as c:
        assert (await raw(c, "tasks/get", {"taskId": done["taskId"]}))["status"] == "completed"
        failed = await raw(c, "tasks/get", {"taskId": running["taskId"]})
        assert failed["status"] == "failed"
        if generation == "2026":
            assert failed["error"]["code"] == -32603
        again = await create(c, generation, "slow_compute", {"seconds": 60}, **{KEY: "r-2"})
        assert again["taskId"] == running["taskId"] and again["status"] == "failed"
        assert (await poll(c, resumable["taskId"]))["status"] == "completed"


async def test_sigkill_http_server_then_restart_on_same_store(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    proc, url = start_http_server(db, tmp_path)
    try:
        async with make_client(url, "2026") as c:
            running = await create(c, "2026", "slow_compute", {"seconds": 60}, **{KEY: "k-kill"})
            await poll(c, running["taskId"], until={"working"})
    finally:
        proc.kill()  # no shutdown path runs: the row still says "working"
        proc.wait(5)
    proc, url = start_http_server(db, tmp_path)
    try:
        async with make_client(url, "2026") as c:
            failed = await raw(c, "tasks/get", {"taskId": running["taskId"]})
            assert failed["status"] == "failed" and failed["error"]["code"] == -32603
            retry = await create(c, "2026", "slow_compute", {"seconds": 60}, **{KEY: "k-kill"})
            assert retry["taskId"] == running["taskId"] and retry["status"] == "failed"
    finally:
        stop(proc)
