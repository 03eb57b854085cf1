"""chit's task server never names a task id in an error (nor in its own logs).

A task id is a bearer credential (seed 003); the MCP texts never require an error to
repeat it. Every ``tasks/*`` error - unknown, foreign, expired, already terminal, bad
answer - is checked in both generations against the id it was asked about.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from chit.demo.server import build_demo_server
from tests.tasks_server_support import create, make_client, poll, raw

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _error(client: Any, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(MCPError) as err:
        await raw(client, method, params)
    return f"{err.value.error.message} {err.value.error.data!r}"


@pytest.mark.parametrize("generation", ["2025", "2026"])
async def test_errors_never_name_the_task(
    generation: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = build_demo_server(tmp_path / "tasks.db")
    unknown = secrets.token_urlsafe(24)
    caplog.set_level(logging.DEBUG, logger="chit.tasks")
    async with make_client(server, generation) as client:
        done = (await create(client, generation, "slow_compute", {"seconds": 0}))["taskId"]
        await poll(client, done)
        failing = (await create(client, generation, "protocol_error_job", {}))["taskId"]
        await poll(client, failing)
        messages = [await _error(client, "tasks/get", {"taskId": unknown})]
        if generation == "2025":
            messages.append(await _error(client, "tasks/result", {"taskId": unknown}))
            messages.append(await _error(client, "tasks/cancel", {"taskId": unknown}))
            messages.append(await _error(client, "tasks/cancel", {"taskId": done}))
        else:
            messages.append(await _error(client, "tasks/cancel", {"taskId": unknown}))
            messages.append(
                await _error(client, "tasks/update", {"taskId": unknown, "inputResponses": {}})
            )
    for task_id in (unknown, done, failing):
        for message in messages:
            assert task_id not in message, message
        assert task_id not in caplog.text
