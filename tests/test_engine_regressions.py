"""Regressions in the reconciler: each test failed before its fix."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.receipts import AcceptanceState, LifecycleState, Receipt
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _answered_to_the_end(sup: Supervisor, accept_if: str) -> Receipt:
    r = await sup.call("demo", "confirm_delete", {"filename": "x.txt"}, accept_if=accept_if)
    r = await sup.follow(r.receipt_id)
    assert r.state is LifecycleState.INPUT_REQUIRED and r.pending_inputs
    r = await sup.answer(r.receipt_id, r.pending_inputs[0].key, {"confirm": True})
    with anyio.fail_after(20):
        while not (r.is_terminal and r.outcome is not None):
            await anyio.sleep(0.05)
            r = sup.store.receipts.require(r.receipt_id)
    # Whatever the reconciler does next, the verdict must already be there.
    await sup.reconciler.check(r.receipt_id)
    return sup.store.receipts.require(r.receipt_id)


@pytest.mark.parametrize(
    ("check", "verdict"),
    [
        ('text contains "NEVER-THERE"', AcceptanceState.REJECTED),
        ('text contains "Deleted"', AcceptanceState.ACCEPTED),
    ],
)
async def test_legacy_answered_task_runs_its_acceptance_check(
    tmp_path: Path, check: str, verdict: AcceptanceState
) -> None:
    """2025: the tasks/result watcher records the result, and the verdict with it."""
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("legacy")) as sup:
        r = await _answered_to_the_end(sup, check)
        assert r.state is LifecycleState.COMPLETED
        assert r.outcome is not None and "Deleted x.txt" in r.outcome.summary
        assert r.acceptance.state is verdict, r.acceptance
