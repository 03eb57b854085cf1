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

    async def origin(self, receipt_id: str) -> dict[str, Any] | None:
        found = self.receipts.get(receipt_id)
        if found is None:
            return None
        return {"proxied": found.get("proxied", False), "work_ref": found.get("work_ref")}


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


async def test_a_receipt_started_through_chit_proxy_is_read_by_its_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local principal, or the owner of the work item the host's call named, reads a
    proxy receipt (status, result); nobody cancels it from here; others see 'unknown'."""
    gateway = FakeGateway()
    server, service = build_sidecar_server(make_home(tmp_path), gateway=gateway)
    who = {"p": "token:alice"}
    monkeypatch.setattr(receipt_tools, "current_principal", lambda: who["p"])
    item, _ = service.start("token:alice", {"task_key": "k", "title": "work"})
    item_id = item["item_id"]
    done = {"state": "completed", "proxied": True}
    gateway.receipts["px1"] = {"receipt_id": "px1", **done, "work_ref": item_id}
    gateway.receipts["px2"] = {"receipt_id": "px2", **done, "work_ref": None}
    gateway.receipts["px3"] = {"receipt_id": "px3", **done, "work_ref": "wi_someone_elses"}
    async with Client(server) as client:
        got, err = await call(client, "receipt_result", {"receipt_id": "px1"})
        assert not err and got["state"] == "completed" and "outcome" in got
        got, err = await call(client, "receipt_status", {"receipt_id": "px1"})
        assert not err and got["state"] == "completed"
        refused, err = await call(client, "receipt_cancel", {"receipt_id": "px1"})
        assert err and "chit proxy" in refused["reason"] and gateway.cancelled == []
        for rid in ("px2", "px3"):  # no work item of alice's: not hers
            for tool in ("receipt_status", "receipt_result", "receipt_cancel"):
                theirs = await raw_text(client, tool, {"receipt_id": rid})
                assert theirs == await raw_text(client, tool, {"receipt_id": "r999"})
        who["p"] = "token:bob"
        assert await raw_text(client, "receipt_result", {"receipt_id": "px1"}) == await raw_text(
            client, "receipt_result", {"receipt_id": "r999"}
        )
        who["p"] = "local"  # stdio: the same user that runs the proxy
        for rid in ("px1", "px2", "px3"):
            got, err = await call(client, "receipt_result", {"receipt_id": rid})
            assert not err and got["receipt_id"] == rid
        # A task_call receipt stays private to its principal, even for local.
        who["p"] = "token:alice"
        started, _ = await call(
            client,
            "task_call",
            {"server": "demo", "tool": "greet", "arguments": {}, "purpose": "p"},
        )
        gateway.receipts[started["receipt_id"]]["proxied"] = True
        who["p"] = "local"
        mine = await raw_text(client, "receipt_result", {"receipt_id": started["receipt_id"]})
        assert mine == await raw_text(client, "receipt_result", {"receipt_id": "r999"})
    await anyio.sleep(0)
