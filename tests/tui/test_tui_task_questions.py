"""The TUI answers a task's sampling and roots requests with the forms it uses elsewhere.

``chit call`` starts the demo's ``summarize_notes`` through the home's daemon (each a
real process; the demo server a stdio child declaring ``sampling`` and ``roots``), in
either task generation. Its task asks the model for a summary, then for the roots to
work in: each waits in the TUI's inbox as a form — the conversation shown literally
(markup as written, no terminal controls, the server's secret and the task id
redacted), a roots answer that is not ``file://`` refused in the form, the question
still waiting — and the server gets what the person typed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from chit import clock
from chit.home import Home
from chit.tui.app import ChitApp
from chit.tui.launch import build_app
from chit.tui.screens.answer import AnswerScreen
from chit.tui.screens.inbox import InboxScreen
from chit.tui.view import Prompt
from tests.daemon_support import chit, daemon_env, daemon_home
from tests.proxy_support import HOSTILE, SECRET, declare, demo_args, show
from tests.test_task_questions import SOURCE, ended, task_ids
from tests.tui.helpers import screen_text, settle, until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The demo server (a secret in its env) declaring sampling and roots; real clock."""
    with daemon_home(tmp_path / "home") as root:
        args = [*demo_args(tmp_path / "demo.db"), "--env", f"API_TOKEN={SECRET}"]
        ran = chit("servers", "add", "demo", *args, "--cwd", str(SOURCE), env=daemon_env(root))
        assert ran.code == 0, ran.err
        declare(root, "sampling", "roots", server="demo")
        monkeypatch.setenv("CHIT_KEY_STORE", "file")
        monkeypatch.setenv("CHIT_HOME", str(root))
        clock.unfreeze()
        yield root


async def _prompt(pilot: Pilot[None], app: ChitApp, kind: str, home: Path, rid: str) -> Prompt:
    """The pending prompt of ``kind``, once the daemon (another process) wrote it."""
    deadline = anyio.current_time() + 90
    while True:
        found = [p for p in app.snapshot.prompts if p.request.kind.value == kind]
        if found:
            return found[0]
        if anyio.current_time() > deadline:
            detail = show(home, rid)
            why = (detail["state"], detail["input_requests"], detail["timeline"][-5:])
            raise AssertionError(f"no {kind} prompt reached chit's inbox: {why}")
        app.refresh_data()
        await settle(pilot)
        await anyio.sleep(0.2)


def _highlighted(app: ChitApp) -> str | None:
    """The kind of the inbox's highlighted prompt (None: no row yet)."""
    screen = app.screen
    receipt = screen.selected_receipt() if isinstance(screen, InboxScreen) else None
    pending = receipt.pending_inputs if receipt is not None else ()
    return pending[0].kind.value if pending else None


async def _open(pilot: Pilot[None], app: ChitApp, kind: str) -> AnswerScreen:
    """Open the inbox's (only) prompt, of ``kind``, in the answer form."""
    if not isinstance(app.screen, InboxScreen):
        await pilot.press("i")
    # The inbox shows the snapshot on its next update: wait for the row itself.
    await until(pilot, lambda: _highlighted(app) == kind, f"the {kind} row in the inbox")
    await pilot.press("r")  # the answer key (focus is nowhere after a modal closed)
    await until(pilot, lambda: isinstance(app.screen, AnswerScreen), "the answer form")
    screen = app.screen
    assert isinstance(screen, AnswerScreen)
    return screen


@pytest.mark.parametrize("mode", ["legacy", "2026"])
async def test_tui_answers_a_tasks_sampling_and_roots(
    home: Path, tmp_path: Path, mode: str
) -> None:
    env = daemon_env(home, CHIT_TASK_MODE=mode)
    args = json.dumps({"notes": HOSTILE})
    ran = chit("call", "demo", "summarize_notes", "--args", args, "--json", env=env)
    assert ran.code == 0, ran.err
    rid = json.loads(ran.out)["receipt_id"]
    app = build_app(Home(home))
    assert isinstance(app, ChitApp)
    async with app.run_test(size=(160, 48)) as pilot:
        await _prompt(pilot, app, "sampling", home, rid)
        form = await _open(pilot, app, "sampling")
        text = screen_text(app)
        assert "[bold]big[/bold]" in text and "[link=https://evil.example]" in text, text
        assert "\x1b" not in text and "\x07" not in text
        assert SECRET not in text and "secret#demo.env.API_TOKEN" in text, text
        (task_id,) = task_ids(tmp_path / "demo.db")
        assert task_id not in text and "task#" in text, text
        assert "Reply" in text and "Model name" in text, text
        form.query_one("#field-0", Input).value = "Release shipped."
        form.query_one("#field-1", Input).value = "tui-model"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, AnswerScreen), "the answer sent")

        await _prompt(pilot, app, "roots", home, rid)
        form = await _open(pilot, app, "roots")
        form.query_one("#field-0", Input).value = "https://x.example/"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "is not a file:// URI" in screen_text(app), "the refusal")
        assert isinstance(app.screen, AnswerScreen)  # the form stays; nothing was sent
        questions = show(home, rid)["input_requests"]
        assert [q["answer_status"] for q in questions if q["kind"] == "roots"] == ["pending"]
        form.query_one("#field-0", Input).value = "file:///srv/tui"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, AnswerScreen), "the roots sent")
        detail = await anyio.to_thread.run_sync(ended, home, rid)
        await pilot.press("q")
    assert detail["state"] == "completed", detail
    summary = detail["outcome"]["summary"]
    assert "Summary by tui-model: Release shipped. (roots: file:///srv/tui)" in summary, summary
