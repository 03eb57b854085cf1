"""Snapshot tests: every screen at 80×24 and 160×48, frozen clock, seeded store.

SVGs live in ``snapshots/test_tui_snapshots/``; update them with
``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` after checking the report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Select

from chit.engine.models import ServerStatus
from chit.receipts import HostInfo
from chit.tui.backend import Mode
from chit.tui.screens.answer import AnswerScreen
from tests.tui.conftest import FakeSupervisor, TestBackend, make_app
from tests.tui.helpers import quiet, select, settle, until
from tests.tui.seed import NOW, rid, seed_question
from tests.tui.test_tui_protocol_log import messages

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def _app(tmp_path: Path, **kwargs: Any) -> Any:
    return make_app(tmp_path / "home", supervisor=FakeSupervisor(), **kwargs)


class SessionBackend(TestBackend):
    """The engine's view of the servers (demo connected, a host through chit proxy) and
    a protocol log."""

    __test__ = False

    def server_status(self) -> dict[str, Any]:
        host = HostInfo(name="claude-code", version="2.1", protocol="2025-11-25")
        return {
            "demo": ServerStatus(
                name="demo",
                transport="stdio",
                connected=True,
                session_started_at=NOW - timedelta(minutes=5),
                pid=4242,
                live_receipts=3,
                hosts=(host,),
            ),
            "reports": ServerStatus(
                name="reports", transport="http", failures=2, last_error="connection refused"
            ),
        }

    def protocol_log(self, server: str, limit: int = 200) -> list[Any]:
        return messages(server)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times in UTC whatever the machine's zone (the pictures must not move)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Receipts grouped by work record, badges, freshness, countdown; detail pane when wide."""
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=quiet)


@pytest.mark.parametrize("size", SIZES)
def test_detail_screen(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """A cancelled receipt: posture with requested/acknowledged/observed times, timeline."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)  # toasts first: one under a dialog stays in the picture
        await select(pilot, rid(5))
        await pilot.press("enter")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_inbox(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """The inbox lists both pending prompts and an agent's question, oldest first."""
    app = _app(tmp_path)
    seed_question(app.backend.home)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("i")
        await quiet(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_answer_form_with_errors(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """The form from the request schema after an empty submit: required-field messages."""

    def form_field(pilot: Pilot[None], i: int = 0) -> Any:
        screen = pilot.app.screen
        if not isinstance(screen, AnswerScreen) or not screen.query(f"#field-{i}"):
            return None
        return screen.query_one(f"#field-{i}")

    def first_error_shown(pilot: Pilot[None]) -> bool:
        field = form_field(pilot)
        shown = [b for b in pilot.app.screen.query(".field-error") if not b.has_class("-empty")]
        return field is not None and field.has_focus and bool(shown)

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)  # toasts first: one under a dialog stays in the picture
        await select(pilot, rid(2))
        await pilot.press("r")
        # The events, not an idle guess: the form mounted and focused, then its errors.
        await until(pilot, lambda: bool(form_field(pilot)) and form_field(pilot).has_focus, "form")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: first_error_shown(pilot), "the required-field messages")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_new_call(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """New call: server and tool chosen, the tool's input form shown."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        pilot.app.screen.query_one("#server", Select).value = "demo"
        await settle(pilot)
        pilot.app.screen.query_one("#tool", Select).value = "greet"
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.usefixtures("utc")
def test_servers(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Servers: sessions (a host through chit proxy on demo), protocol version, task
    support per tool, and why a call was not a task."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("p")
        await quiet(pilot)

    app = _app(tmp_path, backend=SessionBackend)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.usefixtures("utc")
def test_protocol_log(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """The protocol log of the selected receipt's server, the newest message in full."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)
        await select(pilot, rid(5))
        await pilot.press("l")
        await quiet(pilot)

    app = _app(tmp_path, backend=SessionBackend)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """? lists every key with its keymap id."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_empty_state(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """A fresh home says what a receipt is and how to start."""
    assert snap_compare(_app(tmp_path, data=False), terminal_size=size, run_before=quiet)


@pytest.mark.parametrize("size", SIZES)
def test_key_store_unavailable(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """No trusted key store: a banner naming the fix, read-only, actions greyed out."""
    mode = Mode(
        readonly=True,
        banner="Key store unavailable: no trusted keyring backend. Fix: install gnome-keyring"
        " or set CHIT_KEY_STORE=file. Read-only until then.",
    )
    assert snap_compare(_app(tmp_path, mode=mode), terminal_size=size, run_before=quiet)


@pytest.mark.parametrize("size", SIZES)
def test_accept_preview_of_an_error(
    snap_compare: Any, tmp_path: Path, size: tuple[int, int]
) -> None:
    """Accept shows the outcome first; an error result says it is not a success."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)  # toasts first: one under a dialog stays in the picture
        await select(pilot, rid(4))
        await pilot.press("a")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_cancel_confirmation(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Cancel asks first; "Keep running" has the focus; the dialog shows its own keys."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)  # toasts first: one under a dialog stays in the picture
        await select(pilot, rid(1))
        await pilot.press("c")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_reject_reason(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Reject asks for the reason the agent will read."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)  # toasts first: one under a dialog stays in the picture
        await select(pilot, rid(4))
        await pilot.press("x")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_verdict_column_and_pause(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """One outcome accepted, one rejected (by person and by check), the list paused."""
    from chit.receipts import Acceptance, AcceptanceState
    from chit.store import Store

    app = _app(tmp_path)
    with Store.open(app.backend.home) as store:
        for n, acceptance in (
            (3, Acceptance(state=AcceptanceState.ACCEPTED, decided_by="user")),
            (4, Acceptance(state=AcceptanceState.REJECTED, why="no", decided_by="chit:auto")),
        ):
            receipt = store.receipts.require(rid(n))
            changed = receipt.model_copy(update={"acceptance": acceptance})
            store.receipts.update(changed, expected_version=receipt.version)

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("z")
        await quiet(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_agent_question(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """An agent's question: its form, "Send" and "Decline" (no separate cancel)."""
    app = _app(tmp_path)
    seed_question(app.backend.home)

    async def run_before(pilot: Pilot[None]) -> None:
        from textual.widgets import DataTable

        await quiet(pilot)
        await pilot.press("i")
        await settle(pilot)
        table = pilot.app.screen.query_one("#prompts", DataTable)
        keys = [row.value for row in table.rows]
        table.move_cursor(row=keys.index("q:dq_seeded"), animate=False)
        await pilot.press("enter")
        await quiet(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_timeline_collapse(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """240 polls that said "step 1 of 100" are one timeline row: ×240, first–last time."""

    async def run_before(pilot: Pilot[None]) -> None:
        await quiet(pilot)
        await select(pilot, rid(1))
        await pilot.press("enter")
        await quiet(pilot)

    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=run_before)
