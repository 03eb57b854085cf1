"""Closing connections: no exception that is its own context, no owner left behind.

The legacy ``chit follow`` hang (docs/reliability.md, "Hangs say where"): a connection's
owner task was cancelled while connected (an owner the pool had lost track of); closing
the SDK session was cancelled anew (a second ``CancelledError``); the hint queue's task
group, entered first on the same ``AsyncExitStack``, re-raised that exception, and
``contextlib`` then set its ``__context__`` to itself. anyio's ``task_done`` walked that
chain forever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp.client._memory import InMemoryTransport

from chit.demo.server import build_demo_server
from chit.reconcile.connections import ClientOptions, ConnectionPool
from chit.tasks.client import InProcessServer, Mode, TaskClient, TransportServer
from chit.tasks.client.base import enter_task_group

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def context_loops(exc: BaseException | None) -> bool:
    """True when following ``__context__`` from ``exc`` comes back to an exception seen."""
    seen: set[int] = set()
    while exc is not None:
        if id(exc) in seen:
            return True
        seen.add(id(exc))
        exc = exc.__context__
    return False


async def escaping(body: Any) -> BaseException:
    """What leaves ``body(scope)`` in a cancel scope the body cancels (the scope swallows it)."""
    caught: list[BaseException] = []
    with anyio.CancelScope() as scope:
        try:
            await body(scope)
        except BaseException as exc:
            caught.append(exc)
            raise
    assert caught, "the cancellation did not reach the body"
    return caught[0]


@asynccontextmanager
async def slow_to_close(transport: Any) -> AsyncIterator[Any]:
    """A transport whose close awaits, as the SDK's HTTP close does (its DELETE)."""
    async with transport as streams:
        try:
            yield streams
        finally:
            await anyio.sleep(0)  # in a cancelled scope: a second CancelledError


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("closing", ["in-process", "slow-to-close"])
async def test_a_client_cancelled_while_connected_ends_without_a_context_loop(
    tmp_path: Path, mode: str, closing: str
) -> None:
    server = build_demo_server(tmp_path / "tasks.db")
    if closing == "in-process":
        spec: Any = InProcessServer(server)
    else:
        spec = TransportServer(slow_to_close(InMemoryTransport(server)))

    async def connected(scope: anyio.CancelScope) -> None:
        async with TaskClient(spec, mode=cast(Mode, mode)):
            scope.cancel()
            await anyio.sleep_forever()

    exc = await escaping(connected)
    assert isinstance(exc, anyio.get_cancelled_exc_class())
    assert not context_loops(exc), "the exception is in its own __context__ chain"


async def test_a_task_group_on_an_exit_stack_passes_a_later_exit_s_cancellation_on_unchanged() -> (
    None
):
    """The seam itself: the group's exit lets the stack carry on with the exception."""
    seen: list[BaseException] = []

    async def close_cancelled_anew(*exc_info: object) -> None:
        try:
            await anyio.sleep(0)
        except BaseException as exc:
            seen.append(exc)
            raise

    async def body(scope: anyio.CancelScope) -> None:
        async with AsyncExitStack() as stack:
            await enter_task_group(stack)
            stack.push_async_exit(close_cancelled_anew)
            scope.cancel()
            await anyio.sleep_forever()

    exc = await escaping(body)
    assert not context_loops(exc)
    assert seen == [exc], "the close's own cancellation is what leaves the stack"
    assert exc.__context__ is not None  # chained onto the body's cancellation, as nested withs do


@asynccontextmanager
async def held_open(transport: Any, release: anyio.Event) -> AsyncIterator[Any]:
    """A transport whose close waits for ``release`` (a slow close)."""
    async with transport as streams:
        try:
            yield streams
        finally:
            await release.wait()


async def test_an_owner_still_closing_leaves_its_successor_connected(tmp_path: Path) -> None:
    """A reconnect while the broken connection still closes: the new one stays the pool's.

    The old owner's end used to set the new owner's ``closed`` and forget its client; the
    next ``get`` then replaced the events the new owner waited on, and it stayed connected,
    stopped by no one, until the engine's shutdown cancelled it while connected.
    """
    release = anyio.Event()
    made: list[int] = []

    def resolve(_name: str) -> Any:
        made.append(len(made))
        server = build_demo_server(tmp_path / f"tasks{len(made)}.db")
        return TransportServer(held_open(InMemoryTransport(server), release))

    async with anyio.create_task_group() as tg:
        pool = ConnectionPool(resolve, tg, ClientOptions(mode="legacy"))
        first = await pool.get("demo")
        first_closed = pool._conns["demo"].closed  # each owner's "closed" event
        pool.broken("demo", first)  # its owner starts closing, held open
        second = await pool.get("demo")
        second_closed = pool._conns["demo"].closed
        assert second is not first and second_closed is not first_closed
        release.set()  # the first owner ends now, after its successor connected
        with anyio.fail_after(30):  # a safety net: each step waits for an event
            while not (first_closed.is_set() or second_closed.is_set()):
                await anyio.sleep(0.01)
        assert not second_closed.is_set(), "the old owner said the new one had closed"
        assert pool.current("demo") is second, "the new connection was forgotten"
        assert await pool.get("demo") is second and len(made) == 2
        with anyio.fail_after(30):
            await pool.aclose()  # the second owner is told to stop, and does
        assert second_closed.is_set()
        tg.cancel_scope.cancel()
