"""The server's own sampling request behind a task's question (what ``proxy.question``
hands ``chit proxy``'s host), in process: chit's demo server and a Supervisor.

* 2025: the request's params are kept in memory exactly while its request is open on
  chit's ``tasks/result`` — gone once it is answered or declined, none left over rounds
  of tasks (no growth);
* 2026: read again from the task's ``inputRequests``.

Either way the server's task id is redacted and its ``_meta`` left out; a question that
is not a pending sampling question has none.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from chit.demo.fixtures import SUMMARY_HISTORY, SUMMARY_OPTIONS
from chit.demo.server import build_demo_server
from chit.proxy.sampled import server_request
from chit.receipts import InputKind, InputRequest, LifecycleState
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer, Mode
from tests.engine_support import fast_options, supervisor

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _pending(sup: Supervisor, rid: str, kind: InputKind) -> InputRequest:
    """Follow the receipt (this Supervisor reconciles only when asked) to its question."""
    with anyio.fail_after(60):
        while True:
            receipt = await sup.follow(rid)
            found = [q for q in receipt.pending_inputs if q.kind is kind]
            if found:
                return found[0]
            assert not receipt.is_terminal, receipt


@pytest.mark.parametrize("mode", ["legacy", "2026"])
async def test_the_servers_request_is_at_hand_exactly_while_its_question_is_open(
    tmp_path: Path, mode: Mode
) -> None:
    spec = InProcessServer(build_demo_server(tmp_path / "tasks.db"), declare=("sampling", "roots"))
    async with supervisor(tmp_path / "home", {"demo": spec}, fast_options(mode)) as sup:
        for round_ in range(4):
            r = await sup.call("demo", "summarize_notes", {"notes": f"round {round_}"})
            rid = r.receipt_id
            asked = await _pending(sup, rid, InputKind.SAMPLING)
            sent = await server_request(sup, rid, asked.key)
            assert sent is not None and sent["method"] == "sampling/createMessage", sent
            params = sent["params"]
            assert params["systemPrompt"] == "You write one-line summaries."
            assert params["maxTokens"] == 200 and "_meta" not in params, params
            for name, value in SUMMARY_OPTIONS.items():
                assert params[name] == value, (name, params)
            turns = [(m["role"], m["content"]["text"]) for m in params["messages"]]
            assert turns[:-1] == list(SUMMARY_HISTORY), turns
            assert turns[-1][1].endswith(f"in one line: round {round_}"), turns
            task_id = sup.handles.task_id(sup.store.receipts.require(rid))
            assert task_id not in json.dumps(sent) and "task#" in turns[-1][1], sent
            if mode == "legacy":
                assert sup.inbox.kept_requests == 1  # its request is open
            if round_ == 1:  # declined: the task ends without asking for roots
                await sup.answer(rid, asked.key, decline=True)
            else:
                await sup.answer(rid, asked.key, {"text": "Done.", "model": "m"})
                roots = await _pending(sup, rid, InputKind.ROOTS)
                assert await server_request(sup, rid, roots.key) is None  # not sampling
                assert await server_request(sup, rid, asked.key) is None  # answered
                assert sup.inbox.kept_requests == 0
                await sup.answer(rid, roots.key, {"roots": "file:///srv/a"})
            done = await sup.follow(rid)
            assert done.state is LifecycleState.COMPLETED, done
            assert await server_request(sup, rid, asked.key) is None  # the task ended
            assert sup.inbox.kept_requests == 0  # dropped as its request was answered
