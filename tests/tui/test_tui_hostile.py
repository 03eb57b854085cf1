"""Server text is never markup: ``[bold]``, ``[link=…]`` and ``[/]`` render as written.

A server chooses tool names, titles, descriptions, status and prompt messages, enum
titles and result summaries. Textual reads a ``str`` as markup in most widgets, so a
server could style text in chit, plant a link, or hide what follows with ``[/]``. Each
screen that shows server text is rendered here and must show the brackets literally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Select

from chit.engine.models import ProtocolMessage, ServerStatus
from chit.receipts import HostInfo, InputRequest, LifecycleState, Outcome
from chit.store import Store
from chit.tui.probe import Probe, ToolEntry
from tests.tui.conftest import FakeSupervisor, TestBackend, make_app
from tests.tui.helpers import screen_text, select, settle
from tests.tui.seed import NOW, _receipt, rid

pytestmark = pytest.mark.anyio

H = "[b]x[/b][link=http://e.x]y[/]"
"""Hostile text: bold, a link, a closing tag that would swallow what follows."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pick": {
            "type": "string",
            "title": f"T{H}",
            "description": f"D{H}",
            "oneOf": [{"const": "a", "title": f"E{H}"}],
        }
    },
    "required": ["pick"],
}

PROBE = Probe(
    server="demo",
    server_name=f"N{H}",
    server_version="1",
    protocol_version="2025-11-25",
    generation="2025-11-25",
    tasks_detail="2025-11-25 core tasks (per-tool taskSupport)",
    tools=(ToolEntry(f"t{H}", f"Ti{H}", f"De{H}", SCHEMA, "optional"),),
)


class HostileBackend(TestBackend):
    __test__ = False

    def probe(self, name: str) -> Probe:
        return PROBE

    def server_status(self) -> dict[str, Any]:
        host = HostInfo(name=f"h{H}", version="1", protocol="2025-11-25")
        return {"demo": ServerStatus(name="demo", transport="stdio", connected=True, hosts=(host,))}

    def protocol_log(self, server: str, limit: int = 200) -> list[Any]:
        return [
            ProtocolMessage(
                at=NOW,
                direction="received",
                kind="notification",
                method=f"m{H}",
                text=json.dumps({"method": f"m{H}", "params": {"message": f"L{H}"}}),
            )
        ]


def _seed(root: Path) -> Any:
    app = make_app(root, data=False, supervisor=FakeSupervisor(), backend=HostileBackend)
    with Store.open(app.backend.home) as store:
        store.work.create("W-h", f"R{H}")
        store.work.add_note("W-h", f"note{H}")
        asking = _receipt(
            1,
            work_ref="W-h",
            tool=f"t{H}",
            purpose=f"P{H}",
            state=LifecycleState.INPUT_REQUIRED,
            status_message=f"S{H}",
            input_requests=(
                InputRequest(key="k", message=f"M{H}", requested_schema=SCHEMA, received_at=NOW),
            ),
        )
        done = _receipt(
            2,
            tool="greet",
            purpose=f"Q{H}",
            state=LifecycleState.COMPLETED,
            outcome=Outcome(summary=f"O{H}", retrieved_at=NOW),
        )
        for r in (asking, done):
            store.receipts.insert(r, None, None, [])
    return app


def _literal(text: str, *labels: str) -> None:
    for label in labels:
        assert f"{label}{H}" in text, f"{label}… is not shown literally"


async def test_server_text_is_literal_on_every_screen(tmp_path: Path) -> None:
    app = _seed(tmp_path / "home")
    async with app.run_test(size=(220, 60), notifications=True) as pilot:
        await settle(pilot)
        # main list, detail pane, toast (the prompt announced on start is a summary)
        await select(pilot, rid(1))
        _literal(screen_text(app), "P", "R", "M")
        await pilot.press("enter")  # the detail screen
        await settle(pilot)
        _literal(screen_text(app), "P", "S", "M", "R")
        await pilot.press("escape", "i")  # the inbox
        await settle(pilot)
        _literal(screen_text(app), "M")
        await pilot.press("enter")  # the answer form
        await settle(pilot)
        _literal(screen_text(app), "M", "P", "T", "D")
        app.screen.query_one("#field-0", Select).expanded = True
        await settle(pilot)
        _literal(screen_text(app), "E")
        await pilot.press("escape", "escape", "escape")
        await settle(pilot)
        await select(pilot, rid(2))
        await pilot.press("a")  # the accept preview
        await settle(pilot)
        _literal(screen_text(app), "O", "Q")
        await pilot.press("escape", "s", "p")  # servers
        await settle(pilot)
        _literal(screen_text(app), "N", "t", "Ti", "h")  # h: a host through chit proxy
        await pilot.press("l")  # the server's protocol log
        await settle(pilot)
        _literal(screen_text(app), "m", "L")
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("escape", "n")  # new call
        await settle(pilot)
        app.screen.query_one("#server", Select).value = "demo"
        await settle(pilot)
        _literal(screen_text(app), "N")
        app.screen.query_one("#tool", Select).expanded = True
        await settle(pilot)
        assert f"t{H}  [optional]" in screen_text(app)
        await pilot.press("escape")
        app.screen.query_one("#tool", Select).value = f"t{H}"
        await settle(pilot)
        _literal(screen_text(app), "De", "T", "D")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.is_running


async def test_toasts_quote_server_text_literally(tmp_path: Path) -> None:
    app = _seed(tmp_path / "home")
    async with app.run_test(size=(220, 60), notifications=True) as pilot:
        await settle(pilot)
        app.notify(f"prompt: M{H}", title=f"T{H}")
        await settle(pilot)
        _literal(screen_text(app), "M", "T")
