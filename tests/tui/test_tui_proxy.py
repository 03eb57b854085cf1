"""The TUI answers a prompt for a host that cannot: the host's call returns the result.

A host without tasks and without elicitation (a plain ``mcp`` SDK client, its own
process) calls ``confirm_delete`` through ``chit proxy demo``; the call becomes a task on
the server (the daemon's session) and its prompt waits in chit's inbox. The TUI shows the
receipt with the host that started it, the person answers in the inbox, and the host's
call returns "Deleted x.txt".

The same host (no sampling either) calls server-everything's ``trigger-sampling-request``
— not a task — with a hostile prompt: the server's ``sampling/createMessage`` waits in
the inbox as a form (the conversation shown literally, the server's secret redacted),
the person types the reply, and the host's call returns what the server made of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input

from chit import clock
from chit.home import Home
from chit.tui.app import ChitApp
from chit.tui.launch import build_app
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.inbox import InboxScreen
from chit.tui.view import Prompt
from tests.daemon_support import chit, daemon_env, daemon_home
from tests.proxy_support import HOSTILE, SECRET, declare, demo_args, everything_args
from tests.tui.helpers import screen_text, settle

pytestmark = pytest.mark.anyio

HOST = Path(__file__).parents[1] / "fixtures" / "proxy" / "plain_host.py"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with the demo server; file key store (shared with the daemon); real clock."""
    with daemon_home(tmp_path / "home") as root:
        ran = chit("servers", "add", "demo", *demo_args(tmp_path / "demo.db"), env=daemon_env(root))
        assert ran.code == 0, ran.err
        monkeypatch.setenv("CHIT_KEY_STORE", "file")
        monkeypatch.setenv("CHIT_HOME", str(root))
        clock.unfreeze()
        yield root


def _host(home: Path, server: str, tool: str, arguments: str) -> subprocess.Popen[str]:
    """The plain host as its own process, calling ``tool`` through ``chit proxy server``."""
    proxy = [sys.executable, "-m", "chit", "proxy", server]
    return subprocess.Popen(
        [sys.executable, str(HOST), tool, arguments, "--", *proxy],
        env=daemon_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


async def _one_prompt(pilot: Pilot[None], app: ChitApp, host: subprocess.Popen[str]) -> Prompt:
    """The one prompt in the inbox, once the daemon (another process) has written it."""
    deadline = anyio.current_time() + 90
    while not app.snapshot.prompts:
        assert host.poll() is None, host.communicate()[1][-3000:]
        assert anyio.current_time() < deadline, "the prompt never reached chit's inbox"
        app.refresh_data()
        await settle(pilot)
        await anyio.sleep(0.2)
    (prompt,) = app.snapshot.prompts
    return prompt


async def test_inbox_answer_completes_a_proxied_hosts_call(home: Path) -> None:
    host = _host(home, "demo", "confirm_delete", '{"filename": "x.txt"}')
    try:
        app = build_app(Home(home))
        assert isinstance(app, ChitApp)
        async with app.run_test(size=(160, 48)) as pilot:
            prompt = await _one_prompt(pilot, app, host)
            receipt = prompt.receipt  # whole (the table's rows carry no host)
            assert receipt.tool == "confirm_delete"
            assert receipt.host is not None and receipt.host.name  # the host's clientInfo
            await pilot.press("i")
            await settle(pilot)
            assert isinstance(app.screen, InboxScreen)
            await pilot.press("enter")
            await settle(pilot)
            answer = app.screen
            assert isinstance(answer, AnswerScreen)
            assert "Delete x.txt?" in screen_text(app)
            answer.query_one("#field-0", Checkbox).value = True
            await pilot.press("ctrl+s")
            await settle(pilot)
            out, err = await anyio.to_thread.run_sync(lambda: host.communicate(timeout=120))
            await pilot.press("q")
        assert host.returncode == 0, err[-3000:]
        result = json.loads(out)
        assert result["content"][0]["text"] == "Deleted x.txt"
        assert prompt.request.key == "confirm"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)


@pytest.fixture
def everything_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with server-everything (a secret in its env), its session declaring sampling."""
    with daemon_home(tmp_path / "home") as root:
        args = [*everything_args(), "--env", f"API_TOKEN={SECRET}"]
        ran = chit("servers", "add", "everything", *args, env=daemon_env(root))
        assert ran.code == 0, ran.err
        declare(root, "sampling")
        monkeypatch.setenv("CHIT_KEY_STORE", "file")
        monkeypatch.setenv("CHIT_HOME", str(root))
        clock.unfreeze()
        yield root


async def test_inbox_answers_a_sampling_request_outside_a_task(everything_home: Path) -> None:
    home = everything_home
    host = _host(home, "everything", "trigger-sampling-request", json.dumps({"prompt": HOSTILE}))
    try:
        app = build_app(Home(home))
        assert isinstance(app, ChitApp)
        async with app.run_test(size=(160, 48)) as pilot:
            prompt = await _one_prompt(pilot, app, host)
            assert prompt.receipt.tool == "trigger-sampling-request"
            assert prompt.request.kind.value == "sampling"
            await pilot.press("i")
            await settle(pilot)
            assert isinstance(app.screen, InboxScreen)
            inbox = screen_text(app)
            assert SECRET not in inbox, inbox
            await pilot.press("enter")
            await settle(pilot)
            answer = app.screen
            assert isinstance(answer, AnswerScreen)
            text = screen_text(app)
            assert "[bold]big[/bold]" in text and "[link=https://evil.example]" in text, text
            assert "\x1b" not in text and "\x07" not in text
            assert SECRET not in text and "secret#everything.env.API_TOKEN" in text, text
            assert "Reply" in text and "Model name" in text, text
            answer.query_one("#field-0", Input).value = "four"
            await pilot.press("ctrl+s")
            await settle(pilot)
            out, err = await anyio.to_thread.run_sync(lambda: host.communicate(timeout=120))
            await pilot.press("q")
        assert host.returncode == 0, err[-3000:]
        result = json.loads(out)
        text = result["content"][0]["text"]
        assert '"four"' in text and "a person, through chit" in text, text
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
