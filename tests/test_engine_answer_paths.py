"""An answer that cannot be delivered says why, at once, with the documented exit code.

A second process answering a 2025 prompt opens its own ``tasks/result``; when the server
it reaches has never seen the task (a session-bound server, a restarted one), the answer
cannot be delivered: that is exit 8 (like a lost prompt) and the receipt is checked so it
says the task vanished — not a 17-second wait ending in "unreachable" (exit 6), which is
kept for a server that really cannot be reached.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chit.demo.server import build_demo_server
from chit.errors import Conflict, ExitCode
from chit.receipts import AnswerStatus, LifecycleState, RetrievalCondition
from chit.runtime.answers import pending_request
from chit.servers.tools import ServerUnreachable
from chit.tasks.client import HttpServer, InProcessServer
from tests.engine_support import fast_options, supervisor
from tests.proc_support import free_port
from tests.store_support import make_receipt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _prompted(tmp_path: Path) -> str:
    """A 2025 task waiting for input, started by a first Supervisor (then closed)."""
    spec = InProcessServer(build_demo_server(tmp_path / "first.db"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options("legacy")) as sup:
        r = await sup.call("demo", "confirm_delete", {"filename": "x.txt"})
        r = await sup.follow(r.receipt_id)
        assert r.state is LifecycleState.INPUT_REQUIRED and r.pending_inputs
        return r.receipt_id


async def test_answer_to_a_server_that_never_saw_the_task_is_a_conflict(tmp_path: Path) -> None:
    rid = await _prompted(tmp_path)
    other = InProcessServer(build_demo_server(tmp_path / "other.db"))  # never saw the task
    async with supervisor(tmp_path / "home", {"demo": other}, fast_options("legacy")) as sup:
        with pytest.raises(Conflict) as caught:  # not "did not take the answer in time" (6)
            await sup.answer(rid, content={"confirm": True})
        assert caught.value.exit_code is ExitCode.CONFLICT
        assert "the server no longer knows this task" in caught.value.message
        after = sup.store.receipts.require(rid)
        assert after.retrieval is RetrievalCondition.VANISHED
        # Not answered: nothing pretends it was.
        assert all(q.answer_status is not AnswerStatus.ANSWERED for q in after.input_requests)


async def test_answer_to_an_unreachable_server_is_unreachable(tmp_path: Path) -> None:
    rid = await _prompted(tmp_path)
    down = HttpServer(f"http://127.0.0.1:{free_port()}/mcp")  # nobody listens
    async with supervisor(tmp_path / "home", {"demo": down}, fast_options("legacy")) as sup:
        with anyio.fail_after(30), pytest.raises(ServerUnreachable) as caught:
            await sup.answer(rid, content={"confirm": True})
        assert caught.value.exit_code is ExitCode.UNREACHABLE
        assert sup.store.receipts.require(rid).pending_inputs


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (LifecycleState.INPUT_REQUIRED, "the server's question has not reached chit yet"),
        (LifecycleState.WORKING, "has no pending input request"),
    ],
)
def test_nothing_pending_says_whether_a_question_is_on_its_way(
    state: LifecycleState, said: str
) -> None:
    # The status can reach the receipt a poll before the question: a person who answers
    # in that window is told to try again, not that there is nothing to answer.
    receipt = make_receipt("r_waiting", state=state)
    with pytest.raises(Conflict) as caught:
        pending_request(receipt, None)
    assert said in caught.value.message and "\n" not in caught.value.message
    assert caught.value.exit_code is ExitCode.CONFLICT
