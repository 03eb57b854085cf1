"""Task generations translated by ``chit proxy``, each end a real process.

* a 2025-11-25-only host (chit's task client pinned to the handshake) → ``chit proxy demo``
  → the daemon's session to ``chit demo-server`` on 2026-07-28 with the tasks extension;
* a 2026-07-28 host → ``chit proxy everything`` → server-everything 2026.8.31, which
  serves only 2025-11-25 tasks.

Each covers create, input required (answered by the host in its own generation), cancel
and result, and checks the receipts: the server's generation, the host that started
them, and chit's own task ids (never the server's) in the host's hands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import ElicitResult

from chit.tasks import wire
from chit.tasks.client import TaskClient, TaskHandle
from tests.proxy_support import (
    demo_args,
    everything_args,
    proxy_home,
    proxy_spec,
    receipts,
    show,
    until_status,
    until_terminal,
    wait_receipt,
)

pytestmark = pytest.mark.timeout(300)


def _answer_all(schema: dict[str, Any]) -> dict[str, Any]:
    """A valid answer for a form: true for booleans, the first option for choices."""
    content: dict[str, Any] = {}
    for key, prop in (schema.get("properties") or {}).items():
        if prop.get("type") == "boolean":
            content[key] = True
        elif prop.get("type") == "string":
            options = prop.get("enum") or [o.get("const") for o in prop.get("oneOf", [])]
            content[key] = options[0] if options else "x"
    return content


async def _host_answers(task_id: str | None, request: Any) -> Any:
    del task_id
    return ElicitResult(action="accept", content=_answer_all(request.params.requested_schema))


def test_2025_host_through_proxy_to_2026_server(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        spec = proxy_spec(home, "demo", CHIT_TASK_MODE="2026")

        async def host() -> dict[str, str]:
            async with TaskClient(
                spec, mode="legacy", read_timeout=30, input_handler=_host_answers
            ) as tc:
                assert tc.protocol_version == wire.PROTOCOL_2025
                assert tc.generation == wire.PROTOCOL_2025
                assert tc.server_summary().name == "chit-demo"  # the server's own name
                done = await tc.start("slow_compute", {"seconds": 1, "label": "a"}, request_key="a")
                assert isinstance(done, TaskHandle)
                outcome = await tc.result(done.task_id, timeout=60)
                assert outcome.status == "completed"
                assert outcome.result is not None
                assert outcome.result.content[0].text == "Computed a in 1 s"  # type: ignore[union-attr]

                asked = await tc.start("confirm_delete", {"filename": "f.txt"}, request_key="b")
                assert isinstance(asked, TaskHandle)
                await until_status(tc, asked.task_id, "input_required")
                answered = await tc.result(asked.task_id, on_input=_host_answers, timeout=60)
                assert answered.status == "completed"

                long = await tc.start(
                    "slow_compute", {"seconds": 60, "label": "c"}, request_key="c"
                )
                assert isinstance(long, TaskHandle)
                cancelled = await tc.cancel(long.task_id)
                assert cancelled.kind == "cancelled"
                assert (await until_terminal(tc, long.task_id)).status == "cancelled"

                failing = await tc.start("protocol_error_job", {}, request_key="d")
                assert isinstance(failing, TaskHandle)
                failed = await tc.result(failing.task_id, timeout=60)
                assert failed.status == "failed" and failed.error is not None
                assert failed.error.code == -32603
                return {
                    "done": done.task_id,
                    "asked": asked.task_id,
                    "long": long.task_id,
                }

        ids = anyio.run(host)
        # The host's cancel reached the server: its receipt ends cancelled, posture observed.
        wait_receipt(
            home,
            lambda r: r["state"] == "cancelled" and r["cancel"]["posture"] == "observed",
            server="demo",
        )
        rows = {r["tool"] + ":" + r["state"]: r for r in receipts(home, server="demo")}
        assert "confirm_delete:completed" in rows
        for row in rows.values():
            assert row["protocol"] == wire.PROTOCOL_2026  # the server side spoke the extension
            assert row["host"]["name"] == "chit"  # the host's clientInfo
        # The host holds chit's ids, never the server's handles.
        text = (home / "chit.db").read_bytes()
        for task_id in ids.values():
            assert task_id.encode() not in text
        detail = show(home, rows["confirm_delete:completed"]["receipt_id"])
        timeline = detail["timeline"]
        assert any(row["status"] == "input_required" for row in timeline)
        assert "input_answered" in [row["kind"] for row in timeline]


@pytest.mark.interop
def test_2026_host_through_proxy_to_2025_only_server(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        spec = proxy_spec(home, "everything")

        async def host() -> None:
            async with TaskClient(spec, mode="2026", read_timeout=30) as tc:
                assert tc.protocol_version == wire.PROTOCOL_2026
                assert tc.generation == wire.PROTOCOL_2026  # the extension, from a 2025 server
                started = await tc.start(
                    "simulate-research-query", {"topic": "cats"}, request_key="a"
                )
                assert isinstance(started, TaskHandle)
                outcome = await tc.result(started.task_id, timeout=90)
                assert outcome.status == "completed" and outcome.result is not None
                assert "Research Report: cats" in outcome.result.content[0].text  # type: ignore[union-attr]

                ambiguous = await tc.start(
                    "simulate-research-query", {"topic": "dogs", "ambiguous": True}, request_key="b"
                )
                assert isinstance(ambiguous, TaskHandle)
                snap = await until_status(tc, ambiguous.task_id, "input_required", timeout=90)
                assert snap.input_requests, "the prompt reaches the 2026 host as inputRequests"
                answered = await tc.result(ambiguous.task_id, on_input=_host_answers, timeout=90)
                assert answered.status == "completed" and answered.result is not None
                assert "Clarification" in answered.result.content[0].text  # type: ignore[union-attr]

                doomed = await tc.start("simulate-research-query", {"topic": "x"}, request_key="c")
                assert isinstance(doomed, TaskHandle)
                assert (await tc.cancel(doomed.task_id)).kind == "acknowledged"
                assert (await until_terminal(tc, doomed.task_id)).status == "cancelled"

        anyio.run(host)
        rows = receipts(home, server="everything")
        assert len(rows) == 3
        assert {r["protocol"] for r in rows} == {wire.PROTOCOL_2025}
        assert sorted(r["state"] for r in rows) == ["cancelled", "completed", "completed"]
