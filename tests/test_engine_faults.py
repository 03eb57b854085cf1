"""Bad input and lost tasks: typed errors within the read timeout, never a hang.

A scripted peer accepts the call as a 2025 task and then answers ``tasks/get`` with
malformed replies (hypothesis). The receipt must stay unchanged or carry a readable
retrieval error, and the reconciler must keep working afterwards. A short TTL, a
restarted server-everything and notifications switched off complete the set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chit import clock
from chit.clock import ManualClock
from chit.demo.server import build_demo_server
from chit.receipts import LifecycleState, RetrievalCondition
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer, StdioServer, TransportServer
from tests.engine_support import fast_options, follow_virtually, supervisor
from tests.fakes.memory import scripted_transport

TASK = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastUpdatedAt": "2026-01-01T00:00:01Z",
    "ttl": 600000,
    "pollInterval": 1000,
}
READ_TIMEOUT = 1.5
REPLIES = st.one_of(
    st.just({"garbage": True}),
    st.builds(lambda s: {**TASK, "status": s}, st.text(max_size=8)),
    st.builds(lambda d: {**TASK, "createdAt": d}, st.text(max_size=12)),
    st.builds(lambda p: {**TASK, "pollInterval": p}, st.integers(-(10**12), 10**12)),
    st.builds(lambda t: {**TASK, "ttl": t}, st.one_of(st.none(), st.integers(-5, 10**15))),
    st.dictionaries(st.sampled_from(sorted(TASK)), st.integers() | st.text(max_size=4), max_size=4),
    st.just({"error": {"code": -32602, "message": "Task not found"}}),
    st.just({"error": {"code": -32601, "message": "Method not found"}}),
)


@asynccontextmanager
async def scripted_sup(tmp: Path, reply: dict[str, Any]) -> AsyncIterator[Supervisor]:
    def responder(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "tools/list":
            tool = {"name": "job", "inputSchema": {"type": "object"}}
            return {"tools": [{**tool, "execution": {"taskSupport": "optional"}}]}
        if method == "tools/call":
            return {"task": TASK}
        return reply if method == "tasks/get" else None

    async with scripted_transport(responder, "2025") as streams:

        class _Transport:
            async def __aenter__(self) -> Any:
                return streams

            async def __aexit__(self, *exc: object) -> None:
                return None

        options = fast_options("legacy")
        client = options.client.__class__(mode="legacy", read_timeout=READ_TIMEOUT)
        options = options.__class__(**{**options.__dict__, "client": client})
        spec = TransportServer(_Transport())
        async with supervisor(tmp, {"fake": spec}, options) as sup:
            yield sup


async def _one(tmp: Path, reply: dict[str, Any]) -> None:
    async with scripted_sup(tmp, reply) as sup:
        before = await sup.call("fake", "job", {})
        with anyio.fail_after(READ_TIMEOUT * 4):
            after = await sup.reconciler.check(before.receipt_id)
        assert after is not None
        assert after.state in (before.state, *LifecycleState)
        if after.retrieval is not RetrievalCondition.FRESH:
            assert after.retrieval_error  # readable
            assert after.state is before.state  # a failure never changes the lifecycle
        with anyio.fail_after(READ_TIMEOUT * 4):  # the reconciler is alive: it checks again
            await sup.reconciler.check(before.receipt_id)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(REPLIES)
def test_malformed_replies_never_hang(
    tmp_path_factory: pytest.TempPathFactory, reply: dict[str, Any]
) -> None:
    anyio.run(_one, tmp_path_factory.mktemp("fuzz"), reply, backend="asyncio")


def test_silence_is_unreachable_within_the_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        async with scripted_sup(tmp_path, None) as sup:  # type: ignore[arg-type]
            r = await sup.call("fake", "job", {})
            with anyio.fail_after(READ_TIMEOUT * 4):
                after = await sup.reconciler.check(r.receipt_id)
            assert after is not None and after.retrieval is RetrievalCondition.UNREACHABLE
            assert after.next_check_at is not None  # backoff, not abandonment

    anyio.run(main, backend="asyncio")


@pytest.mark.timeout(60)
def test_short_ttl_expires(tmp_path: Path) -> None:
    async def main() -> None:
        clk = ManualClock()  # the server's time and chit's: the TTL passes when we say
        server = build_demo_server(tmp_path / "tasks.db", min_ttl_ms=100, now=clk.now)
        spec = InProcessServer(server)
        options = fast_options("legacy")
        async with supervisor(tmp_path / "home", {"demo": spec}, options, clock=clk) as sup:
            r = await sup.call("demo", "slow_compute", {"seconds": 30}, ttl_ms=300)
            assert r.expires_at is not None
            clk.advance(0.6)
            r = await follow_virtually(sup, clk, r.receipt_id)
            assert r.retrieval is RetrievalCondition.EXPIRED and r.next_check_at is None

    anyio.run(main, backend="asyncio")


@pytest.mark.interop
@pytest.mark.timeout(120)
@pytest.mark.parametrize("notifications", [True, False])
def test_server_everything(tmp_path: Path, notifications: bool) -> None:
    from tests.interop_support import everything_entry, require_npm

    require_npm()
    entry = everything_entry()
    spec = StdioServer("node", [str(entry)], stderr=open(tmp_path / "err.log", "w"))  # noqa: SIM115

    async def main() -> None:
        options = fast_options("auto", notifications=notifications)
        async with supervisor(tmp_path / "home", {"ev": spec}, options) as sup:
            args = {"topic": "tides"}
            r = await sup.call("ev", "simulate-research-query", args)
            assert r.protocol.value == "2025-11-25"
            r = await sup.follow(r.receipt_id)
            assert r.state is LifecycleState.COMPLETED and r.outcome is not None
            if notifications:
                return
            # A restarted server-everything forgot its in-memory tasks: vanished, then no
            # endless retry (nothing scheduled).
            r2 = await sup.call("ev", "simulate-research-query", args)
            sup.pool.broken("ev")
            await sup.pool.wait_closed("ev")  # that server process is gone
            r2 = await sup.follow(r2.receipt_id)
            assert r2.retrieval is RetrievalCondition.VANISHED and r2.next_check_at is None
            later = clock.now() + timedelta(hours=1)
            due = [sup.store.receipts.require(i) for i in sup.reconciler.due_ids(at=later)]
            assert due == [], [
                (d.state, d.retrieval, d.retrieval_error, d.next_check_at, d.outcome) for d in due
            ]

    anyio.run(main, backend="asyncio")
