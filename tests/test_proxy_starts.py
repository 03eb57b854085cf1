"""A proxied host's ``tools/call`` (``chit.proxy.starts``): its intent commits off the loop.

The intent is written with ``synchronous=FULL`` before the request leaves; committed on
the event loop, that fsync held every other host's and server's traffic. These tests
drive :meth:`Starts.start` against the demo server in-process, over a real store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.proxy.models import AttachParams, StartParams
from chit.proxy.starts import Starts
from chit.proxy.upstream import Attachment, HostPeer
from chit.receipts import HostInfo, IntentState
from chit.store import Store
from chit.store.intent_repo import IntentRepository
from chit.store.receipt_repo import ReceiptRepository
from chit.tasks.client import InProcessServer
from tests.engine_support import supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _attachment() -> Attachment:
    host = HostInfo(name="test-host", version="1")
    params = AttachParams(server="demo", host=host)
    return Attachment(number=1, params=params, peer=cast(HostPeer, None), since="now")


def _call(route: str) -> StartParams:
    body = {"name": "slow_compute", "arguments": {"seconds": 60}}
    return StartParams(server="demo", params=body, route=route)


def _held_until_the_loop_runs(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str
) -> Callable[[], Coroutine[Any, Any, None]]:
    """Patch ``owner.name`` to wait for a task on the event loop before it runs.

    Returns that task: run it beside the code under test. The patched method completes
    only if it runs beside the loop, not on it (on the loop, it would wait forever: the
    wait ends after 10 s with an AssertionError).
    """
    entered, released = threading.Event(), threading.Event()
    real = getattr(owner, name)

    def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        if not released.wait(10):
            raise AssertionError(f"the event loop was held while {name} committed")
        return real(self, *args, **kwargs)

    async def release_from_the_loop() -> None:
        while not entered.is_set():
            await anyio.sleep(0.01)
        released.set()

    monkeypatch.setattr(owner, name, held)
    return release_from_the_loop


async def test_the_loop_runs_while_a_started_calls_intent_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intent's commit waits for something only the loop does: it completes only if
    the commit runs beside the loop, not on it (it once held the loop for its fsync)."""
    servers = {"demo": InProcessServer(build_demo_server(tmp_path / "tasks.db"))}
    async with supervisor(tmp_path / "home", servers) as sup:
        starts = Starts(sup)
        release_from_the_loop = _held_until_the_loop_runs(monkeypatch, IntentRepository, "begin")
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_from_the_loop)
            reply = await starts.start(_attachment(), _call("r1"))
        assert reply.kind == "task" and reply.receipt is not None
        intent = sup.store.intents.get(reply.receipt.request_key)
        assert intent is not None and intent.state is IntentState.ACCEPTED


async def test_a_started_calls_intent_is_durable_before_the_request_leaves(
    tmp_path: Path,
) -> None:
    """Another connection (another process) sees the intent before the server is asked,
    and the call is in flight for intent recovery while it waits for its commit."""
    servers = {"demo": InProcessServer(build_demo_server(tmp_path / "tasks.db"))}
    seen: list[tuple[str, bool]] = []
    async with supervisor(tmp_path / "home", servers) as sup:
        starts = Starts(sup)
        send = starts._send

        async def observed_send(client: Any, tool: str, arguments: Any, meta: Any, *a: Any) -> Any:
            from chit.tasks import wire

            key = meta[wire.META_REQUEST_KEY]
            with Store.open_path(sup.store.path) as other:
                stored = other.intents.get(key)
            assert stored is not None, "the request left before its intent committed"
            seen.append((stored.state.value, key in sup.calls.sending))
            return await send(client, tool, arguments, meta, *a)

        starts._send = observed_send  # type: ignore[method-assign,assignment]
        reply = await starts.start(_attachment(), _call("r2"))
        assert reply.kind == "task"
        assert not sup.calls.sending
    assert seen == [("sending", True)]


async def test_the_loop_runs_while_a_started_task_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's acceptance (receipt, first observation, sealed handle, accepted intent)
    commits beside the loop too, and keeps the host that started the call."""
    servers = {"demo": InProcessServer(build_demo_server(tmp_path / "tasks.db"))}
    async with supervisor(tmp_path / "home", servers) as sup:
        starts = Starts(sup)
        release_from_the_loop = _held_until_the_loop_runs(
            monkeypatch, ReceiptRepository, "record_acceptance"
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_from_the_loop)
            reply = await starts.start(_attachment(), _call("r3"))
        assert reply.kind == "task" and reply.receipt is not None
        stored = sup.store.receipts.get(reply.receipt.receipt_id)
        assert stored is not None and stored.host is not None
        assert stored.host.name == "test-host"
