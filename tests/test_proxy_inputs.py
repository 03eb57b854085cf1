"""Sampling and roots requests *inside a task* started through ``chit proxy`` reach the host.

Every end is a real process: a host (chit's task client on the ``mcp`` SDK, or a plain
``mcp``-SDK client without tasks) launches ``chit proxy demo``; the proxy forwards
through chit's daemon to ``chit demo-server`` (a stdio child, a secret in its env),
whose session declares sampling and roots (the server's ``declare``). The demo's
``summarize_notes`` task asks for a summary (``sampling/createMessage``), then for roots
(``roots/list``), and completes with what it got — so its result shows exactly what the
server received.

* A task-augmented host that declared sampling and roots is asked both as real requests
  in its own generation (2025: on its ``tasks/result``; 2026: ``inputRequests``), the
  server in the other generation; its text, model and roots reach the server. The
  sampling request it gets is the server's own (every message, system prompt, model
  preferences, temperature, stop sequences, ``maxTokens``, ``includeContext``,
  ``metadata``) with the server's secret and task id redacted — or, when chit no longer
  has it (here: too large to keep), chit's stored copy.
* A host without tasks (the call held open) is asked on its call, by its capabilities:
  what it did not declare waits in chit's inbox and ``chit answer`` answers it;
  ``prompts = "chit"`` asks the host nothing; a non-``file://`` root from the host is
  refused as a person's is, and the question waits in chit's inbox.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ErrorData,
    ListRootsRequest,
    ListRootsResult,
    Root,
    TextContent,
)

from chit.demo.fixtures import SUMMARY_HISTORY, SUMMARY_OPTIONS
from chit.reconcile.questions import SENT_MAX
from chit.tasks.client import TaskClient, TaskHandle
from tests.daemon_support import chit, daemon_env
from tests.proxy_support import (
    HOSTILE,
    PYTHON,
    SECRET,
    demo_home,
    explained,
    pending_question,
    proxy_spec,
    server_task_ids,
    show,
    wait_receipt,
)

pytestmark = pytest.mark.timeout(300)

HOST_TEXT = "The host's one-line summary."
HOST_MODEL = "host-model-7"
HOST_ROOT = "file:///srv/host-root"


def _sampled() -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=HOST_TEXT), model=HOST_MODEL
    )


def _no_leaks(home: Path, tmp: Path, seen_text: str) -> None:
    """The server's task id is in neither chit's store nor what the host was shown."""
    (task_id,) = server_task_ids(tmp / "demo.db")
    assert task_id.encode() not in (home / "chit.db").read_bytes()
    assert task_id not in seen_text and SECRET not in seen_text, seen_text


def _as_sent(params: CreateMessageRequestParams) -> str:
    """The host was asked the demo server's own request (handle and secret redacted);
    returns it as JSON."""
    wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert wire["systemPrompt"] == "You write one-line summaries.", wire
    assert wire["maxTokens"] == 200, wire
    for name, value in SUMMARY_OPTIONS.items():
        assert wire.get(name) == value, (name, wire)
    turns = [(m["role"], m["content"]["text"]) for m in wire["messages"]]
    assert turns[:-1] == list(SUMMARY_HISTORY), turns
    role, last = turns[-1]
    assert role == "user" and last.startswith("Summarise the notes of task task#"), last
    assert "[bold]big[/bold]" in last and "secret#demo.env.API_TOKEN" in last, last
    return json.dumps(wire)


async def _task_host(spec: Any, host_mode: str, notes: str, seen: dict[str, Any]) -> Any:
    """A task host declaring sampling and roots runs ``summarize_notes`` to its end;
    what it is asked goes to ``seen``."""

    async def answers(task_id: str | None, request: Any) -> Any:
        if isinstance(request, CreateMessageRequest):
            seen["task"] = task_id
            seen["sampling"] = request.params
            return _sampled()
        if isinstance(request, ListRootsRequest):
            seen["roots"] = task_id
            return ListRootsResult(roots=[Root(uri=HOST_ROOT)])
        return ErrorData(code=-32600, message="not this one")

    async with TaskClient(
        spec,
        mode=host_mode,  # type: ignore[arg-type]
        read_timeout=90,  # safety nets: the whole chain may crawl at load ~9
        input_handler=answers,
        declare_sampling=True,
        declare_roots=True,
    ) as tc:
        started = await tc.start("summarize_notes", {"notes": notes}, request_key="s")
        assert isinstance(started, TaskHandle)
        seen["id"] = started.task_id
        return await tc.result(started.task_id, on_input=answers, timeout=180)


@pytest.mark.parametrize(("host_mode", "server_mode"), [("legacy", "2026"), ("2026", "legacy")])
def test_a_task_hosts_sampling_and_roots_answers_reach_the_server(
    tmp_path: Path, host_mode: str, server_mode: str
) -> None:
    with demo_home(tmp_path) as home, explained(home):
        spec = proxy_spec(home, "demo", CHIT_TASK_MODE=server_mode)
        seen: dict[str, Any] = {}
        outcome = anyio.run(_task_host, spec, host_mode, HOSTILE, seen)
        assert outcome.status == "completed", outcome
        text = outcome.result.content[0].text
        assert text == f"Summary by {HOST_MODEL}: {HOST_TEXT} (roots: {HOST_ROOT})", text
        # Asked as real requests of the host's own task (chit's id, never the server's).
        assert seen["task"] == seen["id"] and seen["roots"] == seen["id"], seen
        _no_leaks(home, tmp_path, _as_sent(seen["sampling"]))
        row = wait_receipt(home, lambda r: r["state"] == "completed", server="demo")
        detail = show(home, row["receipt_id"])
        statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
        assert statuses == {"sampling": "answered", "roots": "answered"}, detail
        assert [t["kind"] for t in detail["timeline"]].count("input_answered") == 2
        assert detail["host"]["name"] == "chit"  # the host's clientInfo


@pytest.mark.parametrize(("host_mode", "server_mode"), [("2026", "legacy"), ("legacy", "2026")])
def test_a_request_chit_does_not_have_is_asked_from_its_stored_copy(
    tmp_path: Path, host_mode: str, server_mode: str
) -> None:
    """A sampling request too large to keep (over ``SENT_MAX``): the engine has nothing
    to hand over, the host is asked from chit's stored copy — one user message with the
    redacted, bounded conversation and the server's ``maxTokens`` — and its answer
    still reaches the server."""
    with demo_home(tmp_path) as home, explained(home):
        spec = proxy_spec(home, "demo", CHIT_TASK_MODE=server_mode)
        seen: dict[str, Any] = {}
        notes = f"{HOSTILE} {'x' * SENT_MAX}"
        outcome = anyio.run(_task_host, spec, host_mode, notes, seen)
        assert outcome.status == "completed", outcome
        text = outcome.result.content[0].text
        assert text == f"Summary by {HOST_MODEL}: {HOST_TEXT} (roots: {HOST_ROOT})", text
        params: CreateMessageRequestParams = seen["sampling"]
        (message,) = params.messages
        shown = message.content.text  # type: ignore[union-attr]
        assert shown.startswith("the server asks for a model's reply"), shown
        assert "system: You write one-line summaries." in shown, shown
        assert "task#" in shown and "(at most 200 tokens)" in shown, shown
        assert params.max_tokens == 200 and params.temperature is None, params
        assert len(shown) < 2000, len(shown)
        _no_leaks(home, tmp_path, params.model_dump_json())


def test_a_host_that_cancels_while_asked_to_sample_leaves_the_question_in_chit(
    tmp_path: Path,
) -> None:
    """A host without tasks is asked to sample on its held call and cancels the call
    meanwhile (its SDK sends ``notifications/cancelled``, as on Esc / Ctrl-C): the
    question stays pending in chit's inbox, the receipt runs on, and a person answers
    it (and the roots question the host never declared) in chit: the task completes."""
    with demo_home(tmp_path) as home, explained(home):
        asked = anyio.Event()
        found: dict[str, Any] = {}

        async def sampling(
            context: ClientRequestContext, params: CreateMessageRequestParams
        ) -> CreateMessageResult:
            asked.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        def person() -> None:
            row = wait_receipt(
                home,
                lambda r: r["tool"] == "summarize_notes" and (r["host"] or {}).get("left_at"),
                server="demo",
            )
            rid = found["rid"] = row["receipt_id"]
            pending_question(home, rid, "sampling")  # still there, still pending
            _answer_in_chit(home, rid, '{"text": "By hand.", "model": "person-model"}')
            pending_question(home, rid, "roots")
            _answer_in_chit(home, rid, '{"roots": "file:///srv/person-root"}')

        params = StdioServerParameters(
            command=PYTHON, args=["-m", "chit", "proxy", "demo"], env=daemon_env(home)
        )

        async def host() -> None:
            async with Client(
                params, mode="legacy", read_timeout_seconds=150, sampling_callback=sampling
            ) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "summarize_notes", {"notes": HOSTILE})
                    with anyio.fail_after(150):
                        await asked.wait()
                    tg.cancel_scope.cancel()  # the host's Esc: its call is abandoned
                await anyio.to_thread.run_sync(person)

        anyio.run(host)
        done = wait_receipt(
            home,
            lambda r: r["receipt_id"] == found["rid"] and r["state"] == "completed",
            server="demo",
            timeout=120,
        )
        assert done["cancel"]["posture"] == "not_requested", done  # the host's cancel: none
        detail = show(home, found["rid"])
        assert detail["outcome"]["summary"].startswith("Summary by person-model: By hand.")
        statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
        assert statuses == {"sampling": "answered", "roots": "answered"}, detail


def _answer_in_chit(home: Path, rid: str, answer: str) -> None:
    """``chit answer`` until it is taken, while the question may still be the host's.

    With ``prompts = "host"`` a question is the host's while it may answer; once chit
    refused its answer the person may. Each refusal must say so (no other failure).
    """
    deadline = time.monotonic() + 60
    while True:
        ran = chit("answer", rid, "--json", answer, env=daemon_env(home))
        if ran.code == 0:
            return
        assert 'prompts = "host"' in ran.err, ran
        assert time.monotonic() < deadline, ran
        time.sleep(0.2)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the bad root, on purpose
@pytest.mark.parametrize("case", ["host", "no-roots", "chit", "bad-root", "both"])
def test_a_host_without_tasks_is_asked_by_its_capabilities(tmp_path: Path, case: str) -> None:
    """``host``: both to the host. ``no-roots``: the host declared no roots; that question
    waits in chit's inbox. ``chit``: ``prompts = "chit"``, the host is never asked.
    ``bad-root``: the host's ``https://`` root is refused; the person answers in chit.
    ``both``: ``prompts = "both"``; the person answers the sampling question in chit
    while the host's is open: the first answer wins, the host's late reply is dropped."""
    with (
        demo_home(tmp_path, prompts=case if case in ("chit", "both") else None) as home,
        explained(home),
    ):
        seen: dict[str, Any] = {}
        asked_roots = threading.Event()
        answered_in_chit = threading.Event()

        async def sampling(
            context: ClientRequestContext, params: CreateMessageRequestParams
        ) -> CreateMessageResult:
            seen["sampling"] = params  # judged after the call (not in the host's callback)
            if case == "both":  # reply only after the person did: too late
                await anyio.to_thread.run_sync(answered_in_chit.wait, 90)
            return _sampled()

        async def roots(context: ClientRequestContext) -> ListRootsResult:
            seen["roots"] = True
            asked_roots.set()
            if case == "bad-root":
                bad = Root.model_construct(uri="https://evil.example/share")  # type: ignore[arg-type]
                return ListRootsResult.model_construct(roots=[bad])
            return ListRootsResult(roots=[Root(uri=HOST_ROOT)])

        def person() -> None:
            row = wait_receipt(home, lambda r: r["tool"] == "summarize_notes", server="demo")
            rid = seen["rid"] = row["receipt_id"]
            if case in ("chit", "both"):
                pending_question(home, rid, "sampling")
                reply = '{"text": "By hand.", "model": "person-model"}'
                _answer_in_chit(home, rid, reply)
                answered_in_chit.set()
            if case == "bad-root":
                assert asked_roots.wait(90), "the host was never asked for roots"
            if case in ("no-roots", "chit", "bad-root"):
                pending_question(home, rid, "roots")
                _answer_in_chit(home, rid, '{"roots": "file:///srv/person-root"}')

        params = StdioServerParameters(
            command=PYTHON, args=["-m", "chit", "proxy", "demo"], env=daemon_env(home)
        )

        async def host() -> Any:
            async with (
                Client(
                    params,
                    mode="legacy",
                    read_timeout_seconds=150,
                    sampling_callback=sampling,
                    list_roots_callback=None if case == "no-roots" else roots,
                ) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(anyio.to_thread.run_sync, person)
                return await client.call_tool("summarize_notes", {"notes": HOSTILE})

        result = anyio.run(host)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error is False, text
        mine = f"Summary by {HOST_MODEL}: {HOST_TEXT}"
        summary = "Summary by person-model: By hand." if case in ("chit", "both") else mine
        where = HOST_ROOT if case in ("host", "both") else "file:///srv/person-root"
        assert text == f"{summary} (roots: {where})", text
        assert ("sampling" in seen) is (case != "chit"), seen
        assert ("roots" in seen) is (case in ("host", "bad-root", "both")), seen
        if "sampling" in seen:
            _no_leaks(home, tmp_path, _as_sent(seen["sampling"]))
        detail = show(home, seen["rid"])
        assert detail["state"] == "completed", detail
        statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
        assert statuses == {"sampling": "answered", "roots": "answered"}, detail
        assert [t["kind"] for t in detail["timeline"]].count("input_answered") == 2
