"""task_call / receipt_*: shapes through a gateway, and privacy per principal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from chit.sidecar import receipt_tools
from chit.sidecar.server import build_sidecar_server
from tests.sidecar_support import call, make_home, raw_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeGateway:
    """Stands in for the Supervisor: receipts in a dict."""

    def __init__(self) -> None:
        self.receipts: dict[str, dict[str, Any]] = {}
        self.cancelled: list[str] = []

    async def start_call(self, **kw: Any) -> dict[str, Any]:
        rid = f"r{len(self.receipts) + 1}"
        self.receipts[rid] = {"receipt_id": rid, "state": "working", "work_ref": kw["work_ref"]}
        return {"receipt_id": rid, "state": "working", "next": {"action": "wait"}}

    async def status(self, receipt_id: str) -> dict[str, Any] | None:
        return self.receipts.get(receipt_id)

    async def result(self, receipt_id: str) -> dict[str, Any] | None:
        found = self.receipts.get(receipt_id)
        return None if found is None else {**found, "outcome": None}

    async def cancel(self, receipt_id: str) -> dict[str, Any] | None:
        self.cancelled.append(receipt_id)
        return self.receipts.get(receipt_id)


async def test_receipts_are_private_to_their_principal(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    gateway = FakeGateway()
    server, _ = build_sidecar_server(make_home(tmp_path), gateway=gateway)
    who = {"p": "token:alice"}
    monkeypatch.setattr(receipt_tools, "current_principal", lambda: who["p"])
    args = {"server": "demo", "tool": "greet", "arguments": {"name": "x"}, "purpose": "hi"}
    async with Client(server) as client:
        started, err = await call(client, "task_call", args)
        assert not err and started["receipt_id"] == "r1" and started["state"] == "working"
        assert "next" in started and started["contract"] == "chit.work/1"
        status, err = await call(client, "receipt_status", {"receipt_id": "r1"})
        assert not err and status["state"] == "working"
        who["p"] = "token:bob"
        for tool in ("receipt_status", "receipt_result", "receipt_cancel"):
            theirs = await raw_text(client, tool, {"receipt_id": "r1"})
            unknown = await raw_text(client, tool, {"receipt_id": "r999"})
            assert theirs == unknown
        assert gateway.cancelled == []  # bob's cancel never reached the Supervisor
        who["p"] = "token:alice"
        _done, err = await call(client, "receipt_cancel", {"receipt_id": "r1"})
        assert not err and gateway.cancelled == ["r1"]
        bad, err = await call(client, "task_call", {**args, "arguments": "not an object"})
        assert err and "must be a JSON object" in bad["reason"]
    await anyio.sleep(0)
