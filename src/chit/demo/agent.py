"""The scripted agent of ``chit demo``: work records, notes and a mix of tasks.

It behaves like an agent would: it declares its units of work through the sidecar
(``work_start`` / ``work_note`` / ``work_complete``, applied to the library by the
executor), then starts tool calls as tasks on the demo server — one finishes quickly, one
asks for input, one fails, one is slow enough to cancel. Starting a call needs the
Supervisor, which lives above this layer, so the caller passes it in as ``call``.

The agent also knows where its script comes to rest (``settled``): a headless run waits
for that event instead of sleeping for a guessed time, which a loaded machine outlasts.
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
    resting: dict[str, frozenset[str]] = field(default_factory=dict)
    """Receipt id -> the lifecycle states its task rests in once the server got to it."""
    work_resting: dict[str, str] = field(default_factory=dict)
    """Work record id -> the status the script leaves it in."""
    finished: threading.Event = field(default_factory=threading.Event)
    """Set when the script has played to its end (not when it was stopped early)."""

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

    def _start(
        self,
        tool: str,
        args: dict[str, Any],
        purpose: str,
        item: str | None,
        rests: frozenset[str],
    ) -> None:
        try:
            receipt = self.call(SERVER, tool, args, purpose, item)
        except Exception as exc:  # a demo step failing must not end the demo
            log.warning("demo call %s failed: %s", tool, exc)
            self.errors.append(f"{tool}: {exc}")
            return
        receipt_id = getattr(receipt, "receipt_id", None)
        self.started.append(receipt_id or tool)
        if receipt_id is not None:
            self.resting[receipt_id] = rests

    def settled(self, store: Any) -> bool:
        """True once the script has finished and everything it did has come to rest.

        Every task it started is in a state it rests in (the quick ones ended, the
        question asked, the long one still working) and every work record has the
        status the script gave it (the executor applies the sidecar's intents later).

        Args:
            store: an open ``chit.store.Store`` of the demo's home.
        """
        if not self.finished.is_set():
            return False
        for receipt_id, states in self.resting.items():
            receipt = store.receipts.get(receipt_id)
            if receipt is None or receipt.state.value not in states:
                return False
        for work_id, status in self.work_resting.items():
            record = store.work.get(work_id)
            if record is None or record.status != status:
                return False
        return True

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
            ended = frozenset({"completed"})
            # 2026 reports a failing tool as completed with isError.
            failed = frozenset({"failed", "completed"})
            steps: list[tuple[str, dict[str, Any], str, str | None, frozenset[str]]] = [
                (
                    "slow_compute",
                    {"seconds": 4, "label": "Q1 totals"},
                    "crunch Q1 totals",
                    report,
                    ended,
                ),
                (
                    "confirm_delete",
                    {"filename": "old-report.txt"},
                    "delete last year's draft",
                    cleanup,
                    frozenset({"input_required"}),
                ),
                ("failing_job", {}, "upload to the archive (fails on purpose)", report, failed),
                (
                    "slow_compute",
                    {"seconds": 600, "label": "full reindex"},
                    "full reindex: slow, cancel me",
                    None,
                    frozenset({"working"}),
                ),
                ("greet", {"name": "Ada"}, "say hello", report, ended),
            ]
            for tool, args, purpose, item, rests in steps:
                if stop.wait(self.pace):
                    return
                self._start(tool, args, purpose, item, rests)
            self._follow(
                service, "note", report, text="totals started; waiting for the archive upload"
            )
            self._follow(service, "note", cleanup, text="asked before deleting anything")
            if stop.wait(self.pace * 4):
                return
            self._follow(service, "complete", report, summary="draft ready for review")
            from chit.sidecar.executor import START_STATUS

            for work_id, status in ((report, "completed"), (cleanup, START_STATUS)):
                if work_id is not None:
                    self.work_resting[work_id] = status
            self.finished.set()
        finally:
            service.close()
