"""Sampling and roots requests outside a task wait in chit's inbox and are answered there.

Every end is a real process: a plain ``mcp``-SDK host (no tasks, no sampling, no roots,
no elicitation) launches ``chit proxy everything`` over stdio; the proxy forwards
through chit's daemon to server-everything, a stdio child of the daemon, whose session
declares ``sampling`` / ``roots`` because the server's ``declare`` setting says so.

* ``trigger-sampling-request`` (a tool that cannot be a task) sends
  ``sampling/createMessage`` during the host's call: it waits under the call's receipt,
  with a form (the conversation shown, the reply asked for); a person answers with
  ``chit answer`` and the host's call returns what the server made of that reply. The
  prompt is hostile (Rich markup, control characters, the server's own secret): ``chit
  show`` prints it literally, the secret redacted.
* server-everything asks ``roots/list`` on its own right after the session starts: the
  question gets a receipt of its own; a person answers with ``file://`` roots (anything
  else is refused in one line and the question waits on), and the server has them —
  its ``get-roots-list`` tool lists them to the host.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.daemon_support import chit, daemon_env
from tests.proxy_support import (
    HOSTILE,
    PYTHON,
    SECRET,
    declare,
    everything_args,
    proxy_home,
    question_waits,
    receipts,
    show,
    wait_receipt,
)

pytestmark = pytest.mark.timeout(240)


def _params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "proxy", "everything"], env=daemon_env(home)
    )


def test_sampling_during_a_call_is_answered_in_chit_and_shown_literally(tmp_path: Path) -> None:
    args = [*everything_args(), "--env", f"API_TOKEN={SECRET}"]
    with proxy_home(tmp_path, everything=args) as home:
        declare(home, "sampling")
        env = daemon_env(home)
        seen: dict[str, Any] = {}

        def person() -> None:
            row = wait_receipt(home, question_waits)
            rid = seen["rid"] = row["receipt_id"]
            seen["text"] = chit("show", rid, env=env)
            seen["json"] = chit("show", rid, "--json", env=env)
            seen["bad"] = chit("answer", rid, "--json", "{}", env=env)  # the reply is required
            seen["ran"] = chit("answer", rid, "--json", '{"text": "four"}', env=env)

        async def host() -> Any:
            async with (
                Client(_params(home), mode="legacy", read_timeout_seconds=120) as client,
                anyio.create_task_group() as tg,
            ):
                tools = await client.list_tools()
                assert "trigger-sampling-request" in [t.name for t in tools.tools]
                tg.start_soon(anyio.to_thread.run_sync, person)
                return await client.call_tool("trigger-sampling-request", {"prompt": HOSTILE})

        result = anyio.run(host)
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error is False, texts
        assert '"four"' in texts and "a person, through chit" in texts, texts
        bad = seen["bad"]
        assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1, bad
        assert "text" in bad.err, bad
        assert seen["ran"].code == 0, seen["ran"].err
        shown = seen["text"]
        assert shown.code == 0, shown.err
        # Literal: the markup as written, controls made printable, the secret redacted.
        assert "[bold]big[/bold] [link=https://evil.example]click[/]" in shown.out, shown.out
        assert "\x1b" not in shown.out and "\x07" not in shown.out
        assert "system: You are a helpful test server." in shown.out, shown.out
        assert "- text (text, required" in shown.out, shown.out
        assert SECRET not in shown.out and "secret#everything.env.API_TOKEN" in shown.out
        assert SECRET not in seen["json"].out and seen["json"].code == 0
        detail = show(home, seen["rid"])
        assert detail["state"] == "completed" and detail["tool"] == "trigger-sampling-request"
        (question,) = detail["input_requests"]
        assert question["kind"] == "sampling" and question["answer_status"] == "answered"


def test_roots_asked_on_its_own_are_answered_in_chit(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        declare(home, "roots")
        env = daemon_env(home)
        seen: dict[str, Any] = {}
        answered, done = threading.Event(), threading.Event()

        def person() -> None:
            # The server asks at the session's start; if the host's get-roots-list reaches
            # it before the answer did, it asks again: every such question is answered.
            deadline = time.monotonic() + 180
            while not done.is_set():
                assert time.monotonic() < deadline, "no roots question reached chit's inbox"
                for row in receipts(home, state="input_required"):
                    if row["tool"] != "(roots/list)":
                        continue
                    rid = row["receipt_id"]
                    if "rid" not in seen:
                        seen["rid"] = rid
                        bad = '{"roots": "http://x.example/"}'
                        seen["bad"] = chit("answer", rid, "--json", bad, env=env)
                    roots = '{"roots": "file:///srv/alpha file:///srv/beta"}'
                    seen.setdefault("ran", chit("answer", rid, "--json", roots, env=env))
                    answered.set()
                done.wait(0.2)

        async def host() -> Any:
            async with (
                Client(_params(home), mode="legacy", read_timeout_seconds=120) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(anyio.to_thread.run_sync, person)
                try:
                    await anyio.to_thread.run_sync(answered.wait, 180)
                    return await client.call_tool("get-roots-list", {})
                finally:
                    done.set()

        result = anyio.run(host)
        bad = seen["bad"]
        assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1, bad
        assert "file://" in bad.err, bad
        assert seen["ran"].code == 0, seen["ran"].err
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        assert "file:///srv/alpha" in texts and "file:///srv/beta" in texts, texts
        detail = show(home, seen["rid"])
        assert detail["state"] == "completed" and detail["synchronous"] is True, detail
        assert [q["answer_status"] for q in detail["input_requests"]] == ["answered"]
        assert detail["host"] is None, detail  # nobody's call: the server asked on its own
        late = chit("answer", seen["rid"], "--json", '{"roots": ""}', env=env)
        assert late.code == 8 and len(late.err.strip().splitlines()) == 1, late
