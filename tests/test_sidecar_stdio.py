"""The stdio sidecar as a process: bad input, the executor in-process, stats CLI."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chit.home import Home
from tests.sidecar_support import PYTHON, env_for, make_home, spawn_stdio, stop

pytestmark = pytest.mark.timeout(90)


class RawSidecar:
    """``chit sidecar`` over stdio, driven line by line."""

    def __init__(self, home: Home) -> None:
        self.proc = spawn_stdio(home)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                self.lines.put({"unparsable": line.decode(errors="replace")})

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg))

    def reply(self, rid: int, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if msg.get("id") == rid:
                return msg
        raise AssertionError(f"no reply to {rid}")

    def close(self) -> None:
        stop(self.proc)


@pytest.fixture
def sidecar(tmp_path: Path):  # type: ignore[no-untyped-def]
    home = make_home(tmp_path)
    side = RawSidecar(home)
    side.request(
        0,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    )
    assert "result" in side.reply(0)
    side.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield side, home
    side.close()


def _call(side: RawSidecar, rid: int, tool: str, args: Any) -> dict[str, Any]:
    side.request(rid, "tools/call", {"name": tool, "arguments": args})
    return side.reply(rid)


def test_bad_input_then_ping_answers(sidecar) -> None:  # type: ignore[no-untyped-def]
    side, home = sidecar
    side.send("{not json")
    side.send('{"hello": "world"}')
    side.request(1, "no/such")
    assert side.reply(1)["error"]["code"] == -32601
    side.request(2, "tools/call", {"name": 123})
    assert side.reply(2)["error"]["code"] == -32602
    huge = _call(side, 3, "work_start", {"task_key": "t", "title": "T", "purpose": "x" * (2 << 20)})
    assert huge["result"]["isError"] is True
    assert "payload too large" in huge["result"]["structuredContent"]["reason"]
    bad = _call(side, 4, "work_status", {"item_id": "wi_x", "status": "nope"})
    assert bad["result"]["isError"] is True
    assert not home.sidecar_db_path.exists() or _count(home) == 0  # nothing was stored
    side.request(5, "ping")
    assert side.reply(5)["result"] == {}


def _count(home: Home) -> int:
    import sqlite3

    with sqlite3.connect(home.sidecar_db_path) as conn:
        return int(conn.execute("SELECT count(*) FROM intents").fetchone()[0])


def test_in_process_executor_materializes(sidecar) -> None:  # type: ignore[no-untyped-def]
    side, home = sidecar
    start = _call(side, 1, "work_start", {"task_key": "t", "title": "T"})["result"]
    item = start["structuredContent"]["item_id"]
    note = _call(side, 2, "work_note", {"item_id": item, "text": "early"})["result"]
    assert note["structuredContent"]["state"] == "queued"
    deadline = time.monotonic() + 20
    rid = 10
    while time.monotonic() < deadline:
        rid += 1
        info = _call(side, rid, "work_inspect", {"item_id": item})["result"]["structuredContent"]
        if info["state"] == "live" and not info["pending"]:
            break
        time.sleep(0.1)
    assert info["state"] == "live" and info["materialized"] is True
    stats = subprocess.run(
        [PYTHON, "-m", "chit", "sidecar", "--stats", "--json"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=30,
    )
    data = json.loads(stats.stdout)
    assert data["anchors"]["live"] == 1 and data["intents"]["applied"] == 2
