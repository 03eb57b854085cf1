"""The engine in process against chit's demo server, both task generations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chit.demo.server import build_demo_server
from chit.errors import UsageError
from chit.receipts import AcceptanceState, AnswerStatus, CancelPosture, IntentState, LifecycleState
from chit.runtime import Completed, InputRequired, Supervisor
from chit.tasks.client import InProcessServer
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["legacy", "2026"])
async def sup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Supervisor]:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options(request.param)) as s:
        yield s


async def test_call_reconcile_result_acceptance(sup: Supervisor) -> None:
    seen: list[object] = []
    sup.subscribe(seen.append)
    r = await sup.call(
        "demo", "slow_compute", {"seconds": 0.2, "label": "x"}, accept_if='text contains "x"'
    )
    assert r.state is LifecycleState.WORKING and r.handle is not None
    intent = sup.store.intents.get(r.request_key)
    assert intent is not None and intent.state is IntentState.ACCEPTED
    r = await sup.follow(r.receipt_id)
    assert r.state is LifecycleState.COMPLETED and r.outcome is not None
    assert r.outcome.summary == "Computed x in 0.2 s"
    assert r.acceptance.state is AcceptanceState.ACCEPTED
    assert any(isinstance(e, Completed) for e in seen)
    # the raw task id never reaches the receipt document
    assert sup.handles.task_id(r) not in r.model_dump_json()


async def test_rejected_by_check_and_manual_accept(sup: Supervisor) -> None:
    r = await sup.call("demo", "slow_compute", {"seconds": 0.1}, accept_if='text contains "nope"')
    r = await sup.follow(r.receipt_id)
    assert r.acceptance.state is AcceptanceState.REJECTED
    r = sup.accept(r.receipt_id, why="good enough")
    assert r.acceptance.state is AcceptanceState.ACCEPTED


async def test_synchronous_answer_is_completed_with_reason(sup: Supervisor) -> None:
    r = await sup.call("demo", "greet", {"name": "Ada"})
    assert r.synchronous and r.state is LifecycleState.COMPLETED and r.not_task_reason
    assert r.outcome is not None and r.outcome.summary == "Hello, Ada!"


async def test_input_required_answered(sup: Supervisor) -> None:
    asked: list[InputRequired] = []
    sup.subscribe(lambda e: asked.append(e) if isinstance(e, InputRequired) else None)
    r = await sup.call("demo", "confirm_delete", {"filename": "a.txt"})
    r = await sup.follow(r.receipt_id)
    assert r.state is LifecycleState.INPUT_REQUIRED and len(r.pending_inputs) == 1
    assert asked
    with pytest.raises(UsageError):
        await sup.answer(r.receipt_id, None, {"confirm": "yes"})
    r = await sup.answer(r.receipt_id, None, {"confirm": True})
    assert r.input_requests[0].answer_status is AnswerStatus.ANSWERED
    r = await sup.follow(r.receipt_id)
    assert (
        r.state is LifecycleState.COMPLETED and r.outcome and "Deleted a.txt" in r.outcome.summary
    )


async def test_cancel_mid_run(sup: Supervisor) -> None:
    r = await sup.call("demo", "slow_compute", {"seconds": 10})
    r = await sup.cancel(r.receipt_id)
    r = await sup.follow(r.receipt_id)
    assert r.state is LifecycleState.CANCELLED
    assert r.cancel.posture is CancelPosture.OBSERVED
    assert r.cancel.observed_state is LifecycleState.CANCELLED
    again = await sup.cancel(r.receipt_id)
    assert again.cancel.posture is CancelPosture.OBSERVED  # terminal: nothing more to do


async def test_tool_error_semantics(sup: Supervisor) -> None:
    r = await sup.follow((await sup.call("demo", "failing_job", {})).receipt_id)
    assert r.outcome is not None and r.outcome.is_error
    legacy = r.protocol.value == "2025-11-25"
    assert r.state is (LifecycleState.FAILED if legacy else LifecycleState.COMPLETED)
    r = await sup.follow((await sup.call("demo", "protocol_error_job", {})).receipt_id)
    assert r.state is LifecycleState.FAILED and r.outcome and r.outcome.error_code == -32603
