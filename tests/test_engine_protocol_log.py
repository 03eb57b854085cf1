"""The per-server protocol log and taking a verdict back, in process and over the socket.

The log is what the TUI's protocol pane shows: the JSON-RPC messages chit exchanged
with a server, newest last, with every task handle and secret redacted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from chit.engine.local import LocalEngine
from chit.engine.remote import RemoteEngine
from chit.errors import Conflict
from chit.home import Home
from chit.receipts import AcceptanceState, LifecycleState
from tests.daemon_support import chit, daemon_env, daemon_home
from tests.engine_support import demo_stdio, fast_options, file_key_env, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[LocalEngine]:
    home = tmp_path / "home"
    write_config(home, {"demo": demo_stdio(tmp_path / "tasks.db")})
    async with LocalEngine.open(
        Home(home), environ=file_key_env(home), options=fast_options("2026"), run=True
    ) as e:
        yield e


async def test_the_log_shows_the_exchange_without_a_handle(engine: LocalEngine) -> None:
    receipt = await engine.call("demo", "confirm_delete", {"filename": "a.txt"})
    receipt = await engine.follow(receipt.receipt_id)
    assert receipt.pending_inputs
    handle = engine.supervisor.handles.task_id(receipt)
    log = await engine.protocol_log("demo", limit=1000)
    methods = [m.method for m in log if m.kind == "request"]
    assert "initialize" in methods or "server/discover" in methods
    assert "tools/call" in methods
    assert {m.direction for m in log} == {"sent", "received"}
    assert any(m.kind == "response" for m in log)
    assert [m.at for m in log] == sorted(m.at for m in log)
    text = "\n".join(m.text for m in log)
    assert handle not in text
    assert "task#" in text
    assert len(await engine.protocol_log("demo", limit=3)) == 3
    assert await engine.protocol_log("nobody") == []


async def test_a_verdict_can_be_taken_back(engine: LocalEngine) -> None:
    receipt = await engine.call("demo", "greet", {"name": "Ada"})
    receipt = await engine.follow(receipt.receipt_id)
    assert receipt.state is LifecycleState.COMPLETED
    accepted = await engine.accept(receipt.receipt_id)
    assert accepted.acceptance.state is AcceptanceState.ACCEPTED
    reopened = await engine.reopen(receipt.receipt_id)
    assert reopened.acceptance.state is AcceptanceState.PENDING
    assert reopened.acceptance.decided_at is None
    with pytest.raises(Conflict):
        await engine.reopen(receipt.receipt_id)  # nothing left to take back


def test_the_daemon_serves_the_log_and_the_undo(tmp_path: Path) -> None:
    with daemon_home(tmp_path / "home") as home:
        write_config(home, {"demo": demo_stdio(tmp_path / "tasks.db")})
        env = daemon_env(home)
        assert chit("daemon", "start", env=env).code == 0
        ran = chit("call", "demo", "greet", "--arg", "name=Ada", "--wait", env=env)
        assert ran.code == 0, ran.err
        listed = chit("receipts", "--json", env=env)
        receipt_id = json.loads(listed.out)[0]["receipt_id"]

        async def main() -> None:
            async with RemoteEngine.open(Home(home), start=False, client="test") as remote:
                log = await remote.protocol_log("demo")
                assert any(m.method == "tools/call" for m in log)
                await remote.accept(receipt_id)
                back = await remote.reopen(receipt_id)
                assert back.acceptance.state is AcceptanceState.PENDING

        anyio.run(main)
