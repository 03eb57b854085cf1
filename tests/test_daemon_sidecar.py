"""The sidecar's receipt tools are the daemon's clients: an agent's task outlives them.

``chit sidecar`` over stdio (no ``--no-daemon``): an agent starts a task on a stdio
server with ``task_call``; the task lives in the daemon's session of that server, so it
survives the sidecar process and is the same task ``chit answer`` and ``chit follow``
reach from other processes — and the sidecar's ``receipt_status`` sees their work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.daemon_support import children, chit, daemon_env, daemon_home, daemon_pid
from tests.sidecar_support import call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _sidecar(env: dict[str, str]) -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "chit", "sidecar"], env=env)
    return Client(params, read_timeout_seconds=60)


async def test_an_agents_stdio_task_outlives_the_sidecar(tmp_path: Path) -> None:
    with daemon_home(tmp_path / "home") as home:
        env = daemon_env(home)
        demo = [sys.executable, "-m", "chit", "demo-server", "--db", str(tmp_path / "t.db")]
        added = chit("--no-daemon", "servers", "add", "demo", "--command", demo[0], "--",
                     *demo[1:], env=env)  # fmt: skip
        assert added.code == 0, added.err
        async with _sidecar(env) as agent:
            started, failed = await call(
                agent,
                "task_call",
                {
                    "server": "demo",
                    "tool": "confirm_delete",
                    "arguments": {"filename": "a.txt"},
                    "purpose": "clean up",
                },
            )
            assert not failed, started
            rid = started["receipt_id"]
        # The sidecar is gone; its task runs on in the daemon's own server process.
        pid = daemon_pid(home)
        assert pid is not None and children(pid), "the demo server runs under the daemon"
        waited = chit("follow", rid, "--json", env=env, timeout=120)
        doc: dict[str, Any] = json.loads(waited.out)
        assert doc["state"] == "input_required" and doc["retrieval"] == "fresh", doc
        answered = chit("answer", rid, "--json", json.dumps({"confirm": True}), env=env)
        assert answered.code == 0, answered.err
        done = chit("follow", rid, "--json", env=env, timeout=120)
        assert done.code == 0, done.err
        assert "Deleted a.txt" in json.loads(done.out)["outcome"]["summary"]
        # A new sidecar process reads what the others did.
        async with _sidecar(env) as agent:
            with anyio.fail_after(60):
                status, failed = await call(agent, "receipt_status", {"receipt_id": rid})
            assert not failed and status["state"] == "completed", status
        assert daemon_pid(home) == pid  # one daemon served the sidecars and the CLI
