"""Sampling and roots requests *inside a task* are answered in chit, in both generations.

Every end is a real process: ``chit call`` asks the home's daemon, whose session of
``chit demo-server`` (a stdio child, its ``API_TOKEN`` a sealed secret) declares
``sampling`` and ``roots`` because the server's ``declare`` says so. The demo's
``summarize_notes`` task asks the client's model for a summary (``sampling/createMessage``)
and then for the roots to work in (``roots/list``), and completes with what it got:

* 2025-11-25 (``CHIT_TASK_MODE=legacy``): each request arrives on chit's open
  ``tasks/result``, related-task ``_meta`` naming the task; the answer is the JSON-RPC
  response to it;
* 2026-07-28: each is an entry of the task's ``inputRequests``; the answer goes back
  in ``tasks/update`` ``inputResponses``.

Either way the question waits in chit's inbox as the same form chit uses outside a task
(reply text and model; ``file://`` roots), ``chit answer`` validates and sends it, and
the server gets the text and the model. The prompt is hostile — Rich markup, terminal
controls, the server's own secret and the task's id: ``chit show`` prints it literally,
both redacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import chit, daemon_env, daemon_home
from tests.proxy_support import HOSTILE, SECRET, SOURCE, demo_args, demo_home, show
from tests.proxy_support import pending_question as pending
from tests.proxy_support import server_task_ids as task_ids

pytestmark = pytest.mark.timeout(240)

MODES = ["legacy", "2026"]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Path]:
    """A home with ``demo`` (a secret in its env) declaring sampling and roots."""
    with demo_home(tmp_path) as home:
        yield home


def start(home: Path, env: dict[str, str], notes: str = HOSTILE) -> str:
    """``chit call demo summarize_notes``: the receipt id (the task runs on)."""
    args = json.dumps({"notes": notes})
    ran = chit("call", "demo", "summarize_notes", "--args", args, "--json", env=env)
    assert ran.code == 0, ran.err
    receipt: dict[str, Any] = json.loads(ran.out)
    assert receipt["protocol"] != "sync", receipt
    return str(receipt["receipt_id"])


def ended(home: Path, rid: str, timeout: float = 90) -> dict[str, Any]:
    """Wait until ``rid`` is terminal with its result retrieved; return ``show --json``."""
    deadline = time.monotonic() + timeout
    while True:
        detail = show(home, rid)
        if detail["state"] in ("completed", "failed", "cancelled") and detail.get("outcome"):
            return detail
        assert time.monotonic() < deadline, f"never ended: {detail}"
        time.sleep(0.2)


@pytest.mark.parametrize("mode", MODES)
def test_sampling_and_roots_in_a_task_answered_with_chit_answer(
    demo: Path, tmp_path: Path, mode: str
) -> None:
    env = daemon_env(demo, CHIT_TASK_MODE=mode)
    rid = start(demo, env)
    pending(demo, rid, "sampling")
    shown = chit("show", rid, env=env)
    assert shown.code == 0, shown.err
    # Literal: the markup as written, controls made printable, secret and task id redacted.
    assert "[bold]big[/bold] [link=https://evil.example]click[/]" in shown.out, shown.out
    assert "\x1b" not in shown.out and "\x07" not in shown.out
    assert "system: You write one-line summaries." in shown.out, shown.out
    assert "- text (text, required" in shown.out, shown.out
    assert SECRET not in shown.out and "secret#demo.env.API_TOKEN" in shown.out, shown.out
    (task_id,) = task_ids(tmp_path / "demo.db")
    assert task_id not in shown.out and "task#" in shown.out, shown.out
    as_json = chit("show", rid, "--json", env=env)
    assert SECRET not in as_json.out and task_id not in as_json.out
    bad = chit("answer", rid, "--json", "{}", env=env)  # the reply is required
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1, bad
    reply = '{"text": "Release shipped.", "model": "claude-by-hand"}'
    ran = chit("answer", rid, "--json", reply, env=env)
    assert ran.code == 0, ran.err

    pending(demo, rid, "roots")
    refused = chit("answer", rid, "--json", '{"roots": "http://x.example/ file:///ok"}', env=env)
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1, refused
    assert "is not a file:// URI" in refused.err, refused.err
    assert pending(demo, rid, "roots", timeout=1)  # still waiting
    roots = '{"roots": "file:///srv/alpha file:///srv/beta"}'
    ran = chit("answer", rid, "--json", roots, env=env)
    assert ran.code == 0, ran.err

    detail = ended(demo, rid)
    assert detail["state"] == "completed", detail
    summary = detail["outcome"]["summary"]
    assert "Summary by claude-by-hand: Release shipped." in summary, summary
    assert "file:///srv/alpha, file:///srv/beta" in summary, summary
    statuses = {q["kind"]: q["answer_status"] for q in detail["input_requests"]}
    assert statuses == {"sampling": "answered", "roots": "answered"}, detail


@pytest.mark.parametrize("mode", MODES)
def test_a_declined_sampling_request_reaches_the_task(demo: Path, mode: str) -> None:
    env = daemon_env(demo, CHIT_TASK_MODE=mode)
    rid = start(demo, env, notes="quiet notes")
    pending(demo, rid, "sampling")
    ran = chit("answer", rid, "--decline", env=env)
    assert ran.code == 0, ran.err
    detail = ended(demo, rid)
    assert detail["state"] == "completed", detail
    assert "the client declined" in detail["outcome"]["summary"], detail
    (question,) = detail["input_requests"]
    assert question["kind"] == "sampling" and question["answer_status"] == "declined"


def test_a_client_that_did_not_declare_sampling_gets_no_task(tmp_path: Path) -> None:
    with daemon_home(tmp_path / "home") as home:
        args = [*demo_args(tmp_path / "d.db"), "--cwd", str(SOURCE)]
        ran = chit("servers", "add", "demo", *args, env=daemon_env(home))
        assert ran.code == 0, ran.err
        call = chit("call", "demo", "summarize_notes", env=daemon_env(home))
        assert call.code != 0 and len(call.err.strip().splitlines()) == 1, call
        assert "declare the sampling and roots capability" in call.err, call.err
