"""The Engine protocol in process: LocalEngine and HostedEngine against chit's demo server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import ObjectReceiveStream

from chit.engine import Engine
from chit.engine.hosted import HostedEngine
from chit.engine.local import LocalEngine
from chit.engine.models import EngineEvent, ReceiptUpdate
from chit.errors import NotFound
from chit.home import Home
from chit.receipts import LifecycleState
from chit.tasks.client import StdioServer
from tests.engine_support import demo_engine, fast_options, file_key_env, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[LocalEngine]:
    async with demo_engine(tmp_path, run=True) as e:
        yield e


async def _until(
    stream: ObjectReceiveStream[EngineEvent], rid: str, ended: bool = True
) -> list[ReceiptUpdate]:
    seen: list[ReceiptUpdate] = []
    with anyio.fail_after(20):
        async for event in stream:
            if isinstance(event, ReceiptUpdate) and event.receipt.receipt_id == rid:
                seen.append(event)
                if not ended or event.ended is not None:
                    return seen
    return seen


async def test_implementations_satisfy_the_protocol(engine: LocalEngine) -> None:
    assert isinstance(engine, Engine)
    assert issubclass(HostedEngine, Engine)


async def test_events_follow_a_call_to_its_end_with_cursors(engine: LocalEngine) -> None:
    async with engine.events() as stream:
        r = await engine.call("demo", "slow_compute", {"seconds": 0.2, "label": "x"})
        seen = await _until(stream, r.receipt_id)
    assert seen[0].new and seen[0].receipt.state is LifecycleState.WORKING
    assert seen[-1].ended is LifecycleState.COMPLETED
    cursors = [e.cursor for e in seen]
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
    done = await engine.follow(r.receipt_id)
    assert done.outcome is not None and "Computed x" in done.outcome.summary


async def test_since_replays_what_a_subscriber_missed(engine: LocalEngine) -> None:
    async with engine.events() as stream:
        first = await engine.call("demo", "greet", {"name": "Ada"})
        cursor = (await _until(stream, first.receipt_id, ended=False))[-1].cursor
    # Nobody listens while this task runs to its end.
    missed = await engine.call("demo", "slow_compute", {"seconds": 0.1})
    missed = await engine.follow(missed.receipt_id)
    assert missed.state is LifecycleState.COMPLETED
    async with engine.events(since=cursor) as stream:
        replayed = await _until(stream, missed.receipt_id, ended=False)
    assert replayed[0].receipt.state is LifecycleState.COMPLETED
    assert replayed[0].ended is LifecycleState.COMPLETED and replayed[0].cursor > cursor


async def test_one_receipt_stream_and_prompt_signal(engine: LocalEngine) -> None:
    other = await engine.call("demo", "slow_compute", {"seconds": 0.1})
    r = await engine.call("demo", "confirm_delete", {"filename": "a.txt"})
    async with engine.events(receipt_id=r.receipt_id) as stream:
        r = await engine.follow(r.receipt_id)
        assert r.pending_inputs
        await engine.answer(r.receipt_id, None, {"confirm": True})
        seen = await _until(stream, r.receipt_id)
    assert all(e.receipt.receipt_id == r.receipt_id for e in seen)
    assert seen[-1].ended is LifecycleState.COMPLETED
    assert other.receipt_id not in {e.receipt.receipt_id for e in seen}


async def test_tools_carry_input_schemas_and_unknown_server_is_not_found(
    engine: LocalEngine,
) -> None:
    info = await engine.tools("demo")
    slow = info.tool("slow_compute")
    assert slow is not None and "seconds" in slow.input_schema.get("properties", {})
    assert slow.task_support in ("optional", "required")
    with pytest.raises(NotFound):
        await engine.tools("nope")


async def test_servers_report_the_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    demo = StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp_path / "t.db")]
    )
    write_config(home, {"demo": demo})
    async with LocalEngine.open(
        Home(home), environ=file_key_env(home), options=fast_options()
    ) as engine:
        (before,) = await engine.servers()
        assert before.name == "demo" and before.transport == "stdio" and not before.connected
        await engine.call("demo", "slow_compute", {"seconds": 5})
        (after,) = await engine.servers()
        assert after.connected and after.session_started_at is not None
        assert after.live_receipts == 1


def test_hosted_engine_serves_another_event_loop(tmp_path: Path) -> None:
    home = tmp_path / "home"
    demo = StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp_path / "t.db")]
    )
    write_config(home, {"demo": demo})
    hosted = HostedEngine.start(Home(home), environ=file_key_env(home), options=fast_options())
    try:

        async def use() -> list[ReceiptUpdate]:
            async with hosted.events() as stream:
                r = await hosted.call("demo", "slow_compute", {"seconds": 0.2})
                return await _until(stream, r.receipt_id)

        seen = anyio.run(use)
        assert seen[-1].ended is LifecycleState.COMPLETED
    finally:
        hosted.close()


@pytest.mark.parametrize("own_thread", [False, True])
async def test_open_engine_in_process(tmp_path: Path, own_thread: bool) -> None:
    from chit.engine.opening import open_engine

    home = tmp_path / "home"
    demo = StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp_path / "t.db")]
    )
    write_config(home, {"demo": demo})
    async with open_engine(
        Home(home), use_daemon=False, own_thread=own_thread, environ=file_key_env(home)
    ) as engine:
        assert isinstance(engine, Engine)
        r = await engine.call("demo", "greet", {"name": "Ada"})
        assert r.outcome is not None and r.outcome.summary == "Hello, Ada!"
        assert (await engine.receipt(r.receipt_id[:20])).receipt_id == r.receipt_id
