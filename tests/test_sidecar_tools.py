"""The sidecar's MCP surface in process: shapes, validation before storage, work_ask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from chit.home import Home
from chit.sidecar import decisions
from chit.sidecar.contract import CONTRACT, MAX_CALL_BYTES
from chit.sidecar.server import build_sidecar_server
from chit.store import Store
from tests.sidecar_support import call, executor, make_home, raw_text, sqlite_db, store
from tests.tasks_server_support import create, make_client, poll

pytestmark = pytest.mark.anyio

SHARED = {"contract", "item_id", "state", "anchor", "materialized", "failure_class", "reason"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path):  # type: ignore[no-untyped-def]
    return make_home(tmp_path)


@pytest.fixture
def server(home):  # type: ignore[no-untyped-def]
    srv, _service = build_sidecar_server(home)
    return srv


def _rows(home: Home) -> tuple[int, int]:
    with store(home) as s:
        db = sqlite_db(s)
        a = db.execute("SELECT count(*) FROM anchors").fetchone()[0]
        i = db.execute("SELECT count(*) FROM intents").fetchone()[0]
    return int(a), int(i)


async def test_tool_list_and_shapes(server, home) -> None:  # type: ignore[no-untyped-def]
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"work_start", "work_note", "work_status", "work_complete", "work_inspect"} <= set(
            tools
        )
        assert {"work_stats", "work_ask"} <= set(tools)
        enum = tools["work_status"].input_schema["properties"]["status"]["enum"]
        assert enum == ["planned", "in_progress", "blocked", "review", "done"]
        start, err = await call(client, "work_start", {"task_key": "t", "title": "T"})
        assert not err and set(start) >= SHARED and start["contract"] == CONTRACT
        assert start["state"] == "queued" and start["materialized"] is False
        item = start["item_id"]
        for tool, args in [
            ("work_note", {"text": "n"}),
            ("work_status", {"status": "review"}),
            ("work_complete", {"summary": "ok"}),
        ]:
            out, err = await call(client, tool, {"item_id": item, **args})
            assert not err and out["state"] == "queued" and out["item_id"] == item
        ex, _ = executor(home)
        await anyio.to_thread.run_sync(ex.run_once)
        info, err = await call(client, "work_inspect", {"item_id": item})
        assert not err and info["state"] == "live" and info["materialized"] is True
        assert info["pending"] == [] and info["last_failure"] is None
        stats, _ = await call(client, "work_stats", {})
        assert stats["anchors"]["live"] == 1 and stats["intents"]["applied"] == 4
        resource = await client.read_resource("chit://sidecar/stats")
        assert json.loads(resource.contents[0].text)["anchors"]["live"] == 1  # type: ignore[union-attr]
    with Store.open(home) as lib:
        record = lib.work.get(item)
        assert record is not None and record.status == "completed"


async def test_unknown_status_names_contract_and_stores_nothing(server, home) -> None:  # type: ignore[no-untyped-def]
    async with Client(server) as client:
        start, _ = await call(client, "work_start", {"task_key": "t", "title": "T"})
        before = _rows(home)
        out, err = await call(
            client, "work_status", {"item_id": start["item_id"], "status": "archived"}
        )
        assert err and out["state"] == "failed" and out["failure_class"] == "permanent"
        assert CONTRACT in out["reason"] and "archived" in out["reason"]
        assert _rows(home) == before


@pytest.mark.parametrize(
    ("tool", "args", "needle"),
    [
        ("work_start", {"title": "T"}, "missing required argument 'task_key'"),
        ("work_start", {"task_key": 5, "title": "T"}, "'task_key' must be a string"),
        ("work_note", {"item_id": "x", "text": ""}, "'text' must not be empty"),
        ("work_note", {"item_id": "x", "text": "t", "extra": 1}, "unknown argument"),
        ("work_note", {"item_id": "x", "text": "y" * 70_000}, "payload too large"),
    ],
)
async def test_bad_arguments_rejected_before_db(server, home, tool, args, needle) -> None:  # type: ignore[no-untyped-def]
    async with Client(server) as client:
        out, err = await call(client, tool, args)
    assert err and needle in out["reason"] and out["contract"] == CONTRACT
    assert _rows(home) == (0, 0)


@pytest.mark.filterwarnings("ignore:ping is removed")
async def test_oversize_call_is_error_before_any_write_and_server_answers(server, home) -> None:  # type: ignore[no-untyped-def]
    async with Client(server, mode="legacy") as client:  # ping exists only before 2026
        big = {"task_key": "t", "title": "T", "purpose": "p" * (MAX_CALL_BYTES + 10)}
        out, err = await call(client, "work_start", big)
        assert err and "payload too large" in out["reason"]
        assert _rows(home) == (0, 0)
        await client.send_ping()
        ok, err = await call(client, "work_start", {"task_key": "t", "title": "T"})
        assert not err and ok["state"] == "queued"


async def test_unknown_item_answer_is_byte_identical(server) -> None:  # type: ignore[no-untyped-def]
    async with Client(server) as client:
        a = await raw_text(client, "work_note", {"item_id": "wi_nope1", "text": "x"})
        b = await raw_text(client, "work_note", {"item_id": "wi_nope2", "text": "x"})
        assert a == b


async def test_idempotency_conflict_is_explicit(server) -> None:  # type: ignore[no-untyped-def]
    async with Client(server) as client:
        args: dict[str, Any] = {"task_key": "t", "title": "T", "idempotency_key": "k"}
        first, _ = await call(client, "work_start", args)
        again, _ = await call(client, "work_start", args)
        assert again["item_id"] == first["item_id"] and again["replayed"] is True
        out, err = await call(client, "work_start", {**args, "title": "Other"})
        assert err and "idempotency key reused" in out["reason"]


@pytest.mark.parametrize("generation", ["2025", "2026"])
async def test_work_ask_waits_for_a_decision(home, generation) -> None:  # type: ignore[no-untyped-def]
    srv, service = build_sidecar_server(home)
    async with make_client(srv, generation) as client:
        start, _ = await call(client, "work_start", {"task_key": "t", "title": "T"})
        task = await create(
            client, generation, "work_ask", {"item_id": start["item_id"], "question": "Ship?"}
        )
        waiting = await poll(client, task["taskId"], until={"working"})
        assert waiting["status"] == "working"
        with anyio.fail_after(10):
            while True:
                pending = await anyio.to_thread.run_sync(lambda: decisions.pending(store(home).db))
                if pending:
                    break
                await anyio.sleep(0.05)
        assert pending[0].question == "Ship?" and pending[0].item_id == start["item_id"]
        await anyio.to_thread.run_sync(
            lambda: decisions.decide(store(home).db, pending[0].id, {"ok": True})
        )
        done = await poll(client, task["taskId"])
        assert done["status"] == "completed"
    del service


async def test_work_ask_on_unknown_item_is_refused(home) -> None:  # type: ignore[no-untyped-def]
    srv, _ = build_sidecar_server(home)
    async with Client(srv) as client:
        out, err = await call(client, "work_ask", {"item_id": "wi_nope", "question": "?"})
    assert err and out["reason"] == "unknown item_id"
