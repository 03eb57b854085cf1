"""Hints carry the notified status; only a different status triggers an immediate check."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.receipts import LifecycleState, StatusObserved
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer, TaskClient, TaskHandle
from chit.tasks.client.inputs import Hint
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_hint_is_the_task_id() -> None:
    hint = Hint("t-1", "working", "step 2")
    assert hint == "t-1" and hash(hint) == hash("t-1") and isinstance(hint, str)
    routes: dict[str, int] = {hint: 1}
    assert routes["t-1"] == 1  # routes like the plain id
    assert (hint.status, hint.status_message) == ("working", "step 2")
    odd = Hint.from_params("t-2", {"status": 3, "statusMessage": ["x"]})
    assert (odd.status, odd.status_message) == (None, None)  # ill-typed: not reported


async def _working(sup: Supervisor, poll_ms: int | None = None) -> tuple[str, str]:
    r = await sup.call("demo", "slow_compute", {"seconds": 30, "label": "h"})
    if poll_ms is not None:  # as if the server asked for a long poll interval
        sup.writer.apply(
            r.receipt_id,
            [StatusObserved(status=LifecycleState.WORKING, poll_interval_ms=poll_ms)],
        )
    receipt = sup.store.receipts.require(r.receipt_id)
    assert receipt.state is LifecycleState.WORKING
    return r.receipt_id, sup.reconciler.handles.task_id(receipt)


async def test_message_only_hint_asks_nothing_and_writes_nothing(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rid, task_id = await _working(sup)
        before = sup.store.receipts.require(rid)
        await rec.on_hint(Hint(task_id, "working", "pushed message"))
        assert rid not in rec._hinted and rec.message_hints == 1
        assert rid not in rec._pulled  # its next check (≤ 1 s away) is soon enough
        after = sup.store.receipts.require(rid)
        assert after == before  # the push itself is never written
        assert after.status_message != "pushed message"


async def test_message_only_hint_is_judged_without_the_store(tmp_path: Path) -> None:
    """The copy in hand decides: no statement reaches the store for a message change."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rid, task_id = await _working(sup, poll_ms=120_000)
        statements: list[str] = []
        sup.store.db.conn.set_trace_callback(statements.append)
        try:
            for i in range(20):
                await rec.on_hint(Hint(task_id, "working", f"step {i}"))
        finally:
            sup.store.db.conn.set_trace_callback(None)
        assert statements == []
        assert rec.message_hints == 20 and rid in rec._pulled and rid not in rec._hinted
        # A different status is still news, judged the same way.
        await rec.on_hint(Hint(task_id, "completed"))
        assert rid in rec._hinted


async def test_message_only_hint_pulls_a_distant_check_in(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rid, task_id = await _working(sup, poll_ms=120_000)
        await rec.on_hint(Hint(task_id, "working"))
        assert rid not in rec._hinted and rid in rec._pulled
        first = rec._pulled[rid]
        await rec.on_hint(Hint(task_id, "working"))  # repeats never push it later
        assert rec._pulled[rid] == first
        rec._pulled[rid] = anyio.current_time()  # pretend the pull-in time came
        assert rec._due_pulls() == [rid] and not rec._pulled


@pytest.mark.parametrize(
    "status", ["completed", "input_required", None], ids=["transition", "input", "unknown"]
)
async def test_news_or_unknown_status_checks_now(tmp_path: Path, status: str | None) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("2026")) as sup:
        rec = sup.reconciler
        rid, task_id = await _working(sup)
        await rec.on_hint(Hint(task_id, status) if status else task_id)
        assert rid in rec._hinted and rec.message_hints == 0


async def test_client_passes_the_notified_status(tmp_path: Path) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    hints: list[str] = []
    completed = anyio.Event()

    async def on_hint(task_id: str) -> None:  # a one-argument callback keeps working
        hints.append(task_id)
        if getattr(task_id, "status", None) == "completed":
            completed.set()

    async with TaskClient(spec, mode="legacy", read_timeout=10, on_hint=on_hint) as tc:
        handle = await tc.start(
            "slow_compute", {"seconds": 0.3, "label": "n"}, request_key="hint-n"
        )
        assert isinstance(handle, TaskHandle)
        with anyio.fail_after(10):
            await completed.wait()
    assert all(isinstance(h, Hint) and h == handle.task_id for h in hints)
