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
  conversation it sees is what chit stored: the server's secret and task id redacted.
* A host without tasks (the call held open) is asked on its call, by its capabilities:
  what it did not declare waits in chit's inbox and ``chit answer`` answers it;
  ``prompts = "chit"`` asks the host nothing; a non-``file://`` root from the host is
  refused as a person's is, and the question waits in chit's inbox.
"""

from __future__ import annotations

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

from chit.tasks.client import TaskClient, TaskHandle
from tests.daemon_support import chit, daemon_env
from tests.proxy_support import (
    HOSTILE,
    PYTHON,
    SECRET,
    demo_home,
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


@pytest.mark.parametrize(("host_mode", "server_mode"), [("legacy", "2026"), ("2026", "legacy")])
def test_a_task_hosts_sampling_and_roots_answers_reach_the_server(
    tmp_path: Path, host_mode: str, server_mode: str
) -> None:
    with demo_home(tmp_path) as home:
        spec = proxy_spec(home, "demo", CHIT_TASK_MODE=server_mode)
        seen: dict[str, Any] = {}

        async def answers(task_id: str | None, request: Any) -> Any:
            if isinstance(request, CreateMessageRequest):
                seen["task"] = task_id
                seen["sampling"] = request.params
                return _sampled()
            if isinstance(request, ListRootsRequest):
                seen["roots"] = task_id
                return ListRootsResult(roots=[Root(uri=HOST_ROOT)])
            return ErrorData(code=-32600, message="not this one")

        async def host() -> Any:
            async with TaskClient(
                spec,
                mode=host_mode,  # type: ignore[arg-type]
                read_timeout=30,
                input_handler=answers,
                declare_sampling=True,
                declare_roots=True,
            ) as tc:
                started = await tc.start("summarize_notes", {"notes": HOSTILE}, request_key="s")
                assert isinstance(started, TaskHandle)
                seen["id"] = started.task_id
                return await tc.result(started.task_id, on_input=answers, timeout=120)

        outcome = anyio.run(host)
        assert outcome.status == "completed", outcome
        text = outcome.result.content[0].text
        assert text == f"Summary by {HOST_MODEL}: {HOST_TEXT} (roots: {HOST_ROOT})", text
        # Asked as real requests of the host's own task (chit's id, never the server's).
        assert seen["task"] == seen["id"] and seen["roots"] == seen["id"], seen
        params: CreateMessageRequestParams = seen["sampling"]
        shown = params.messages[0].content.text  # type: ignore[union-attr]
        assert "[bold]big[/bold] [link=https://evil.example]click[/]" in shown, shown
        assert "system: You write one-line summaries." in shown and params.max_tokens == 200
        assert "secret#demo.env.API_TOKEN" in shown and "task#" in shown, shown
        _no_leaks(home, tmp_path, shown)
        row = wait_receipt(home, lambda r: r["state"] == "completed", server="demo")
        detail = show(home, row["receipt_id"])
        statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
        assert statuses == {"sampling": "answered", "roots": "answered"}, detail
        assert [t["kind"] for t in detail["timeline"]].count("input_answered") == 2
        assert detail["host"]["name"] == "chit"  # the host's clientInfo


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
    with demo_home(tmp_path, prompts=case if case in ("chit", "both") else None) as home:
        seen: dict[str, Any] = {}
        asked_roots = threading.Event()
        answered_in_chit = threading.Event()

        async def sampling(
            context: ClientRequestContext, params: CreateMessageRequestParams
        ) -> CreateMessageResult:
            seen["sampling"] = params.messages[0].content.text  # type: ignore[union-attr]
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
            _no_leaks(home, tmp_path, seen["sampling"])
        detail = show(home, seen["rid"])
        assert detail["state"] == "completed", detail
        statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
        assert statuses == {"sampling": "answered", "roots": "answered"}, detail
        assert [t["kind"] for t in detail["timeline"]].count("input_answered") == 2
