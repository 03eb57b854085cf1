"""TUI test fixtures: frozen clock, seeded homes, a fake Supervisor, snapshots in snapshots/.

Snapshots land in ``<repo>/snapshots/<test module>/`` (not ``__snapshots__`` beside the
test): pytest-textual-snapshot resolves ``SVGImageExtension`` at call time, so a
subclass with another ``dirname`` redirects it (see notes/style-anchors.md §2).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot as pts
from textual.widgets import Input

from chit import clock
from chit.home import Home
from chit.tui.app import ChitApp
from chit.tui.backend import Backend, Mode
from chit.tui.config import TuiSettings
from chit.tui.probe import Probe, ToolEntry
from tests.tui.seed import FORM_SCHEMA, NOW, seed

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"


class RootSVGExtension(pts.SVGImageExtension):  # type: ignore[misc]
    """Store SVGs under the repository's top-level ``snapshots/`` directory."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS / test_location.basename)


pts.SVGImageExtension = RootSVGExtension


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def steady(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Frozen clock, no blinking cursor, no NO_COLOR, no animations."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    clock.freeze(NOW)
    yield
    clock.unfreeze()


class FakeSupervisor:
    """Records what the TUI asked for (no network); acceptance uses the store path."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.subscribers: list[Any] = []

    def subscribe(self, callback: Any) -> None:
        self.subscribers.append(callback)

    def answer(self, receipt_id: str, key: str, action: str, content: Any) -> None:
        self.calls.append(("answer", receipt_id, key, action, content))

    def cancel(self, receipt_id: str) -> None:
        self.calls.append(("cancel", receipt_id))

    def call(self, server: str, tool: str, arguments: Any, *, purpose: Any, work_ref: Any) -> None:
        self.calls.append(("call", server, tool, arguments, purpose, work_ref))

    def reconcile_once(self) -> None:
        self.calls.append(("reconcile",))


DEMO_PROBE = Probe(
    server="demo",
    server_name="chit-demo",
    server_version="1",
    protocol_version="2025-11-25",
    generation="2025-11-25",
    tasks_detail="2025-11-25 core tasks (per-tool taskSupport)",
    tools=(
        ToolEntry(
            "greet",
            "Greet",
            "Say hello",
            {
                "type": "object",
                "properties": {"name": {"type": "string", "title": "Name"}},
                "required": ["name"],
            },
            "optional",
        ),
        ToolEntry(
            "slow_compute",
            None,
            "Slow",
            {
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 60}},
            },
            "required",
        ),
        ToolEntry("echo", None, "Plain tool", {"type": "object", "properties": {}}, "forbidden"),
        ToolEntry("multi_input", None, "Form", FORM_SCHEMA, "optional"),
    ),
)


class TestBackend(Backend):
    """A backend with fixed servers and probe answers (no subprocess, no network)."""

    __test__ = False

    def servers(self) -> list[Any]:
        from chit.servers import ServerSpec

        return [
            ServerSpec(name="demo", transport="stdio", command="chit", args=("demo-server",)),
            ServerSpec(name="reports", transport="http", url="http://127.0.0.1:9/mcp"),
        ]

    def probe(self, name: str) -> Probe:
        return DEMO_PROBE


def make_app(
    root: Path,
    *,
    data: bool = True,
    mode: Mode | None = None,
    supervisor: Any = None,
    backend: type[Backend] = TestBackend,
) -> ChitApp:
    """A ChitApp on a seeded home, no timer, fixed theme."""
    home: Home = seed(root, with_data=data)
    chosen = backend(home, mode or Mode(), supervisor)
    settings = TuiSettings(theme="textual-dark", bell=False)
    return ChitApp(chosen, settings, tick=None, home_label="~/.local/share/chit")


@pytest.fixture
def fake() -> FakeSupervisor:
    return FakeSupervisor()


@pytest.fixture
def app(tmp_path: Path, fake: FakeSupervisor) -> ChitApp:
    return make_app(tmp_path / "home", supervisor=fake)
