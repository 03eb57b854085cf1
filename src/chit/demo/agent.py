"""The scripted agent of ``chit demo``: work records, notes and a mix of tasks.

It behaves like an agent would: it declares its units of work through the sidecar
(``work_start`` / ``work_note`` / ``work_complete``, applied to the library by the
executor), then starts tool calls as tasks on the demo server — one finishes quickly, one
asks for input, one fails, one is slow enough to cancel. Starting a call needs the
Supervisor, which lives above this layer, so the caller passes it in as ``call``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chit.home import Home

log = logging.getLogger(__name__)

Call = Callable[[str, str, dict[str, Any], str | None, str | None], Any]
"""``call(server, tool, arguments, purpose, work_ref)``: start a task, return its receipt."""

SERVER = "demo"
"""The name ``chit demo`` registers the fixture server under."""

PRINCIPAL = "demo-agent"


@dataclass
class DemoAgent:
    """Runs the script once; every step is logged and never fatal to the demo.

    Args:
        home: the demo's throwaway home.
        call: starts a tool call as a task (the Supervisor's ``call``).
        pace: seconds between steps (0 in tests).
    """

    home: Home
    call: Call
    pace: float = 0.6
    started: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def _sidecar(self) -> Any:
        from chit.sidecar.service import SidecarService

        return SidecarService(self.home)

    def _work(self, service: Any, key: str, title: str, purpose: str) -> str | None:
        answer, is_error = service.start(
            PRINCIPAL, {"task_key": key, "title": title, "purpose": purpose}
        )
        if is_error:
            self.errors.append(f"work_start {key}: {answer}")
            return None
        return str(answer["item_id"])

    def _follow(self, service: Any, kind: str, item: str | None, **args: Any) -> None:
        if item is None:
            return
        answer, is_error = service.follow(PRINCIPAL, kind, {"item_id": item, **args})
        if is_error:
            self.errors.append(f"work_{kind}: {answer}")

    def _start(self, tool: str, args: dict[str, Any], purpose: str, item: str | None) -> None:
        try:
            receipt = self.call(SERVER, tool, args, purpose, item)
        except Exception as exc:  # a demo step failing must not end the demo
            log.warning("demo call %s failed: %s", tool, exc)
            self.errors.append(f"{tool}: {exc}")
            return
        self.started.append(getattr(receipt, "receipt_id", tool))

    def run(self, stop: threading.Event | None = None) -> None:
        """Play the script (returns early when ``stop`` is set)."""
        stop = stop or threading.Event()
        service = self._sidecar()
        try:
            report = self._work(
                service, "q1-report", "Quarterly report", "Q1 numbers for the board"
            )
            self._follow(service, "note", report, text="gathering the numbers")
            cleanup = self._work(service, "cleanup", "Clean old files", "free disk space")
            steps: list[tuple[str, dict[str, Any], str, str | None]] = [
                ("slow_compute", {"seconds": 4, "label": "Q1 totals"}, "crunch Q1 totals", report),
                (
                    "confirm_delete",
                    {"filename": "old-report.txt"},
                    "delete last year's draft",
                    cleanup,
                ),
                ("failing_job", {}, "upload to the archive (fails on purpose)", report),
                (
                    "slow_compute",
                    {"seconds": 600, "label": "full reindex"},
                    "full reindex: slow, cancel me",
                    None,
                ),
                ("greet", {"name": "Ada"}, "say hello", report),
            ]
            for tool, args, purpose, item in steps:
                if stop.wait(self.pace):
                    return
                self._start(tool, args, purpose, item)
            self._follow(
                service, "note", report, text="totals started; waiting for the archive upload"
            )
            self._follow(service, "note", cleanup, text="asked before deleting anything")
            if not stop.wait(self.pace * 4):
                self._follow(service, "complete", report, summary="draft ready for review")
        finally:
            service.close()
