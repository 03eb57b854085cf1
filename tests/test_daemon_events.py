"""Event streams over the control socket: pushed changes, a cursor that survives restarts,
and a client that never waits forever."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from chit.engine import rpc
from chit.engine.models import ReceiptUpdate
from chit.engine.paths import DaemonPaths
from chit.engine.remote import RemoteEngine
from chit.engine.start import DaemonUnavailable
from chit.home import Home
from chit.receipts import LifecycleState
from tests.daemon_support import chit, daemon_env, daemon_home

pytestmark = [pytest.mark.timeout(180)]


def _register_demo(home: Path, db: Path) -> None:
    demo = [sys.executable, "-m", "chit", "demo-server", "--db", str(db)]
    ran = chit("--no-daemon", "servers", "add", "demo", "--command", demo[0], "--", *demo[1:],
               env=daemon_env(home))  # fmt: skip
    assert ran.code == 0, ran.err


def test_pushed_events_and_a_cursor_that_outlives_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with daemon_home(tmp_path / "home") as root:
        _register_demo(root, tmp_path / "t.db")
        env = daemon_env(root)
        for key, value in env.items():
            monkeypatch.setenv(key, value)  # the daemon this test starts inherits them
        home = Home(root)

        async def first_life() -> int:
            async with RemoteEngine.open(home) as engine, engine.events() as stream:
                r = await engine.call("demo", "slow_compute", {"seconds": 0.3})
                with anyio.fail_after(60):
                    async for event in stream:
                        if isinstance(event, ReceiptUpdate) and event.ended is not None:
                            assert event.receipt.receipt_id == r.receipt_id
                            assert event.ended is LifecycleState.COMPLETED
                            return event.cursor
            raise AssertionError("no end event")

        cursor = anyio.run(first_life)
        assert chit("daemon", "stop", env=env).code == 0
        # Meanwhile (no daemon), another process changes the store.
        done = chit("--no-daemon", "call", "demo", "greet", "--arg", "name=Ada", "--json",
                    env=env)  # fmt: skip
        assert done.code == 0, done.err
        missed = json.loads(done.out)["receipt_id"]

        async def second_life() -> list[str]:
            async with RemoteEngine.open(home) as engine:  # a new daemon
                async with engine.events(since=cursor) as stream:
                    with anyio.fail_after(30):
                        event = await stream.receive()
                assert isinstance(event, ReceiptUpdate) and event.cursor > cursor
                return [event.receipt.receipt_id]

        assert anyio.run(second_life) == [missed]


def test_one_receipt_stream_sees_only_that_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with daemon_home(tmp_path / "home") as root:
        _register_demo(root, tmp_path / "t.db")
        for key, value in daemon_env(root).items():
            monkeypatch.setenv(key, value)

        async def run() -> set[str]:
            async with RemoteEngine.open(Home(root)) as engine:
                watched = await engine.call("demo", "slow_compute", {"seconds": 0.5})
                async with engine.events(receipt_id=watched.receipt_id[:20]) as stream:
                    await engine.call("demo", "greet", {"name": "Ada"})
                    seen: set[str] = set()
                    with anyio.fail_after(60):
                        async for event in stream:
                            assert isinstance(event, ReceiptUpdate)
                            seen.add(event.receipt.receipt_id)
                            if event.ended is not None:
                                return seen
            return set()

        seen = anyio.run(run)
        assert len(seen) == 1


def test_a_daemon_that_does_not_answer_is_not_waited_for_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake daemon says hello, then never answers: the request times out in one line."""
    root = tmp_path / "home"
    root.mkdir(mode=0o700)
    path = DaemonPaths(Home(root)).socket
    slow = rpc.METHODS["servers"].model_copy(update={"timeout_s": 0.5})
    monkeypatch.setitem(rpc.METHODS, "servers", slow)

    async def fake_daemon(stream: anyio.abc.SocketStream) -> None:
        hello = json.loads((await stream.receive()).split(b"\n")[0])
        reply = rpc.HelloResult(
            protocol=rpc.PROTOCOL_VERSION, chit_version="x", pid=1, home=str(root),
            socket=str(path), started_at="now", cursor=0,
        )  # fmt: skip
        await stream.send(rpc.encode(rpc.result(hello["id"], rpc.METHODS["hello"], reply)))
        await anyio.sleep(30)  # and never another word

    async def run() -> str:
        listener = await anyio.create_unix_listener(path)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, fake_daemon)
            try:
                async with RemoteEngine.open(Home(root), start=False) as engine:
                    with pytest.raises(DaemonUnavailable) as info:
                        await engine.servers()
            finally:
                tg.cancel_scope.cancel()
        # After the task group: mypy cannot tell that it re-raises rather than swallows.
        return info.value.message

    message = anyio.run(run)
    assert "did not answer 'servers' within 0.5 s" in message


def test_a_change_another_process_writes_reaches_the_subscribers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``chit accept`` writes the store directly (it needs no server): subscribers of the
    daemon still hear of it, through the change feed's watch of the database."""
    with daemon_home(tmp_path / "home") as root:
        _register_demo(root, tmp_path / "t.db")
        env = daemon_env(root)
        for key, value in env.items():
            monkeypatch.setenv(key, value)

        async def run() -> str:
            async with RemoteEngine.open(Home(root)) as engine:
                done = await engine.call("demo", "greet", {"name": "Ada"})
                async with engine.events(receipt_id=done.receipt_id) as stream:
                    ran = await anyio.to_thread.run_sync(
                        lambda: chit("accept", done.receipt_id, "--why", "fine", env=env)
                    )
                    assert ran.code == 0, ran.err
                    with anyio.fail_after(30):
                        async for event in stream:
                            if isinstance(event, ReceiptUpdate):
                                verdict = event.receipt.acceptance.state.value
                                if verdict == "accepted":
                                    return verdict
            return ""

        assert anyio.run(run) == "accepted"
