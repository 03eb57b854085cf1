"""End to end with real processes: ``chit sidecar`` + ``chit demo-server`` + a Supervisor.

* stdio: an MCP client spawns ``chit sidecar``; the demo server is registered over stdio;
  the sidecar's receipt gateway hosts the Supervisor that reconciles.
* HTTP: two bearer principals; the demo server is registered over stdio and reconciled
  by the gateway's Supervisor, or served over HTTP and reconciled by ``chit daemon``
  (a stdio server lives inside the process that spawned it, so only that process can
  follow its tasks — see docs/sidecar.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from chit.home import Home
from chit.tasks.client import HttpServer, ServerSpec, StdioServer
from tests.engine_support import write_config
from tests.interop_support import http_server
from tests.proc_support import free_port
from tests.sidecar_support import PYTHON, call, env_for, make_home, raw_text, start_http, stop
from tests.tasks_server_support import create, make_client, poll

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

WAIT = 90
"""Bound of each wait for an event (a safety net, not a timing): 20 s ran out while a
daemon took the reconciler lease in a parallel run at load 9."""

SLOW = {"seconds": 1.5, "label": "e2e"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _home(tmp: Path, demo: ServerSpec | None = None) -> Home:
    home = make_home(tmp)
    spec = demo or StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp / "demo.db")]
    )
    write_config(home.root, {"demo": spec})
    return home


def _chit(home: Home, *args: str) -> str:
    out = subprocess.run(
        [PYTHON, "-m", "chit", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


async def _until(client: Client, tool: str, rid: str, states: set[str]) -> dict[str, Any]:
    with anyio.fail_after(40):
        while True:
            view, err = await call(client, tool, {"receipt_id": rid})
            assert not err, view
            if view["state"] in states:
                return view
            await anyio.sleep(0.2)


async def _receipt_flow(client: Client, item_id: str | None = None) -> str:
    """task_call → status → result; a second call → cancel. Returns the first receipt id."""
    args: dict[str, Any] = {
        "server": "demo",
        "tool": "slow_compute",
        "arguments": SLOW,
        "purpose": "end to end",
    }
    if item_id is not None:
        args["item_id"] = item_id
    started, err = await call(client, "task_call", args)
    assert not err, started
    rid = started["receipt_id"]
    assert len(rid) == 26 and started["state"] in ("submitted", "working")
    assert started["contract"] == "chit.work/1" and started["next"]["action"]
    status, err = await call(client, "receipt_status", {"receipt_id": rid})
    assert not err and status["receipt_id"] == rid
    assert status["freshness"] and status["next"]["actor"] and status["status_at"]
    early, _ = await call(client, "receipt_result", {"receipt_id": rid})
    assert early["state"] != "completed" and early["outcome"] is None
    done = await _until(client, "receipt_status", rid, {"completed", "failed"})
    assert done["state"] == "completed", done
    with anyio.fail_after(WAIT):  # terminal is observed first, the result retrieved next
        while (result := (await call(client, "receipt_result", {"receipt_id": rid}))[0])[
            "outcome"
        ] is None:
            await anyio.sleep(0.2)
    assert result["outcome"]["summary"] == "Computed e2e in 1.5 s"
    assert result["outcome"]["is_error"] is False
    long_args = {**args, "arguments": {"seconds": 60, "label": "long"}}
    other, err = await call(client, "task_call", long_args)
    assert not err
    cancelled, err = await call(client, "receipt_cancel", {"receipt_id": other["receipt_id"]})
    assert not err and cancelled["cancellation"] in ("requested", "acknowledged", "observed")
    final = await _until(client, "receipt_status", other["receipt_id"], {"cancelled"})
    assert final["state"] == "cancelled" and final["cancellation"] == "observed", final
    return str(rid)


async def test_stdio_receipts_and_work_ask(tmp_path: Path) -> None:
    home = _home(tmp_path)
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "sidecar"], env=env_for(home)
    )
    async with make_client(params, "2026", read_timeout_seconds=60) as client:
        start, err = await call(client, "work_start", {"task_key": "e2e", "title": "E2E"})
        assert not err
        item = start["item_id"]
        await _receipt_flow(client, item)
        # work_ask: the agent polls the task while a person answers from another process.
        task = await create(client, "2026", "work_ask", {"item_id": item, "question": "Ship?"})
        await poll(client, task["taskId"], until={"working"})
        with anyio.fail_after(WAIT):
            while not (pending := json.loads(_chit(home, "sidecar", "decisions", "--json"))):
                await anyio.sleep(0.1)
        assert pending[0]["question"] == "Ship?" and pending[0]["item_id"] == item
        answered = json.loads(
            _chit(home, "sidecar", "decide", pending[0]["decision_id"], "--json", '{"ok": true}')
        )
        assert answered["state"] == "answered"
        done = await poll(client, task["taskId"], timeout=20)
        assert done["status"] == "completed"
        payload = done["result"]["structuredContent"]
        assert payload["answer"] == {"ok": True} and payload["state"] == "answered"
        # The executor (the sidecar process's) materialized the record meanwhile.
        inspect, _ = await call(client, "work_inspect", {"item_id": item})
        assert inspect["state"] == "live" and inspect["materialized"] is True


def _http_client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


async def _two_principals(url: str, alice: str, bob: str) -> None:
    async with _http_client(url, alice) as a:
        rid = await _receipt_flow(a)
    async with _http_client(url, bob) as b:
        for tool in ("receipt_status", "receipt_result", "receipt_cancel"):
            theirs = await raw_text(b, tool, {"receipt_id": rid})
            unknown = await raw_text(b, tool, {"receipt_id": "r_doesnotexist"})
            assert theirs == unknown and "unknown receipt_id" in theirs
    async with _http_client(url, alice) as a:  # bob's cancel reached nothing
        still, _ = await call(a, "receipt_status", {"receipt_id": rid})
        assert still["state"] == "completed"


def _tokens(home: Home) -> tuple[str, str]:
    return _chit(home, "sidecar", "token", "add", "alice"), _chit(
        home, "sidecar", "token", "add", "bob"
    )


async def test_http_two_principals_gateway_reconciles(tmp_path: Path) -> None:
    home = _home(tmp_path)
    alice, bob = _tokens(home)
    proc, url = start_http(home)
    try:
        await _two_principals(url, alice, bob)
    finally:
        stop(proc)


@pytest.fixture
def demo_http(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    argv = [PYTHON, "-m", "chit", "demo-server", "--http", f"127.0.0.1:{port}"]
    argv += ["--db", str(tmp_path / "demo-http.db")]
    with http_server(argv, port, log=tmp_path / "demo.log"):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_http_two_principals_daemon_reconciles(tmp_path: Path, demo_http: str) -> None:
    home = _home(tmp_path, HttpServer(demo_http))
    alice, bob = _tokens(home)
    daemon = subprocess.Popen(
        [PYTHON, "-m", "chit", "daemon"],
        env=env_for(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proc: subprocess.Popen[bytes] | None = None
    try:
        with anyio.fail_after(WAIT):  # the daemon holds the reconciler lease
            while not json.loads(_chit(home, "reconcile", "--once", "--json"))["viewer"]:
                await anyio.sleep(0.2)
        proc, url = start_http(home, "--no-executor")  # the daemon hosts the executor
        await _two_principals(url, alice, bob)
        async with _http_client(url, alice) as a:
            start, _ = await call(a, "work_start", {"task_key": "d", "title": "By the daemon"})
            with anyio.fail_after(WAIT):
                while not (await call(a, "work_inspect", {"item_id": start["item_id"]}))[0][
                    "materialized"
                ]:
                    await anyio.sleep(0.1)
    finally:
        if proc is not None:
            stop(proc)
        stop(daemon)
