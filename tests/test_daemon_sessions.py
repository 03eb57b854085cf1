"""Session-bound servers across processes: one chit per home, every command its client.

server-everything 2026.8.31 keeps its tasks per session (and, over stdio, per process);
chit's demo server over stdio is a child of whoever started it. Each test starts a task
with ``chit call`` (no ``--wait``: the command returns), answers it with ``chit answer``
from another process, starts a second task and cancels it with ``chit cancel`` from a
third — once with the daemon started on demand by the first command, once with
``chit daemon`` running first.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import Ran, chit, daemon_env, daemon_home, daemon_pid
from tests.interop_support import everything_entry, everything_http, require_npm

pytestmark = [pytest.mark.timeout(240)]

TOOL = "simulate-research-query"


@pytest.fixture(scope="module")
def everything_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_npm()
    with everything_http(tmp_path_factory.mktemp("everything") / "server.log") as url:
        yield url


@pytest.fixture(params=["on demand", "daemon first"])
def started(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _ok(ran: Ran) -> dict[str, Any]:
    assert ran.code == 0, (ran.code, ran.err)
    doc: dict[str, Any] = json.loads(ran.out)
    return doc


def _show(env: dict[str, str], rid: str) -> dict[str, Any]:
    return _ok(chit("show", rid, "--json", env=env))


def _until(env: dict[str, str], rid: str, done: Any, timeout: float = 60) -> dict[str, Any]:
    """Read the receipt (another process's view: the store) until ``done(receipt)``."""
    deadline = time.monotonic() + timeout
    while True:
        doc = _show(env, rid)
        if done(doc) or time.monotonic() > deadline:
            return doc
        time.sleep(0.2)


class Home:
    """A home whose daemon is started the way the test asks, and stopped after."""

    def __init__(self, root: Path, started: str) -> None:
        self.root = root
        self.env = daemon_env(root)
        self.foreground: subprocess.Popen[str] | None = None
        if started == "daemon first":
            self.foreground = subprocess.Popen(
                [sys.executable, "-m", "chit", "daemon"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            deadline = time.monotonic() + 60
            while chit("daemon", "status", env=self.env).code != 0:
                assert self.foreground.poll() is None, "chit daemon exited"
                assert time.monotonic() < deadline, "chit daemon did not start"
                time.sleep(0.1)
        else:
            assert daemon_pid(root) is None

    def register(self, *args: str) -> None:
        ran = chit("--no-daemon", "servers", "add", *args, env=self.env)
        assert ran.code == 0, ran.err

    def close(self) -> None:
        if self.foreground is not None:
            self.foreground.send_signal(signal.SIGTERM)
            assert self.foreground.wait(30) == 0


@pytest.fixture
def home(tmp_path: Path, started: str) -> Iterator[Home]:
    with daemon_home(tmp_path / "home") as root:
        h = Home(root, started)
        try:
            yield h
        finally:
            h.close()


def _asked_or_ended(d: dict[str, Any]) -> bool:
    return bool(d["input_requests"]) or d["state"] not in ("working", "input_required")


def _answer_then_cancel(
    h: Home,
    server: str,
    ask: tuple[str, dict[str, Any]],
    answer: dict[str, Any],
    long: tuple[str, dict[str, Any]],
    answered_text: str,
) -> None:
    env = h.env
    # 1. The call returns at once; the task goes on in the daemon's session.
    tool, args = ask
    first = _ok(chit("call", server, tool, "--args", json.dumps(args), "--json", env=env))
    assert first["state"] == "working", first
    rid = first["receipt_id"]
    pid = daemon_pid(h.root)
    assert pid is not None
    # The server's input_required status can reach the receipt before the question does
    # (2025: tasks/result carries it; 2026: the next tasks/get): wait for the question.
    waiting = _until(env, rid, _asked_or_ended)
    assert waiting["state"] == "input_required" and waiting["input_requests"], waiting
    # 2. Another process answers it, through the same session.
    ran = chit("answer", rid, "--json", json.dumps(answer), "--output-json", env=env)
    assert ran.code == 0, ran.err
    followed = chit("follow", rid, "--json", env=env)
    assert followed.code == 0, followed.err
    done = json.loads(followed.out)
    assert done["state"] == "completed" and done["retrieval"] == "fresh", done
    assert answered_text in (done["outcome"] or {}).get("summary", ""), done["outcome"]
    # 3. A second task, cancelled from a third process.
    tool, args = long
    second = _ok(chit("call", server, tool, "--args", json.dumps(args), "--json", env=env))
    rid2 = second["receipt_id"]
    if args.get("ambiguous"):
        # It waits for an answer until cancelled: nothing races the cancel.
        _until(env, rid2, _asked_or_ended)
    cancelled = chit("cancel", rid2, "--json", env=env)
    assert cancelled.code == 0, cancelled.err
    assert json.loads(cancelled.out)["retrieval"] != "vanished"
    ended = chit("follow", rid2, "--json", env=env)
    assert ended.code == 12, (ended.code, ended.err)  # cancelled
    end = json.loads(ended.out)
    assert end["state"] == "cancelled" and end["cancel"]["posture"] == "observed", end
    assert daemon_pid(h.root) == pid  # one daemon served every command


# How the daemon was started and which transport reaches the server are independent: each
# start mode meets each transport (chit's own server both ways, server-everything's stdio
# on demand and its HTTP with the daemon first), not all six pairs (~30 s each in CI).
@pytest.mark.interop
@pytest.mark.parametrize("started", ["on demand"])
def test_everything_over_stdio(home: Home) -> None:
    require_npm()
    home.register("ev", "--command", "node", "--", str(everything_entry()), "stdio")
    _answer_then_cancel(
        home,
        "ev",
        (TOOL, {"topic": "tides", "ambiguous": True}),
        {"interpretation": "technical"},
        (TOOL, {"topic": "waves", "ambiguous": True}),
        "tides",
    )


@pytest.mark.interop
@pytest.mark.parametrize("started", ["daemon first"])
def test_everything_over_http(home: Home, everything_url: str) -> None:
    home.register("ev", "--url", everything_url)
    _answer_then_cancel(
        home,
        "ev",
        (TOOL, {"topic": "tides", "ambiguous": True}),
        {"interpretation": "technical"},
        (TOOL, {"topic": "waves", "ambiguous": True}),
        "tides",
    )


def test_demo_server_over_stdio(home: Home, tmp_path: Path) -> None:
    demo = [sys.executable, "-m", "chit", "demo-server", "--db", str(tmp_path / "tasks.db")]
    home.register("demo", "--command", demo[0], "--", *demo[1:])
    _answer_then_cancel(
        home,
        "demo",
        ("confirm_delete", {"filename": "a.txt"}),
        {"confirm": True},
        ("slow_compute", {"seconds": 600}),
        "Deleted a.txt",
    )


def test_wait_and_cancel_never_call_a_live_task_vanished(tmp_path: Path) -> None:
    """Regression: with a daemon running, --wait and cancel used a second server process."""
    with daemon_home(tmp_path / "home") as root:
        h = Home(root, "daemon first")
        try:
            demo = [sys.executable, "-m", "chit", "demo-server", "--db", str(tmp_path / "t.db")]
            h.register("demo", "--command", demo[0], "--", *demo[1:])
            waited = chit(
                "call", "demo", "slow_compute", "--arg", "seconds=2", "--wait", "--json",
                env=h.env,
            )  # fmt: skip
            assert waited.code == 0, (waited.code, waited.err)
            assert json.loads(waited.out)["state"] == "completed"
            live = _ok(chit("call", "demo", "slow_compute", "--arg", "seconds=600", "--json",
                            env=h.env))  # fmt: skip
            cancelled = chit("cancel", live["receipt_id"], "--json", env=h.env)
            assert cancelled.code == 0, cancelled.err
            doc = json.loads(cancelled.out)
            assert doc["retrieval"] != "vanished" and doc["cancel"]["posture"] in (
                "acknowledged",
                "observed",
            ), doc
        finally:
            h.close()
