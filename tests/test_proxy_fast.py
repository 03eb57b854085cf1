"""The proxy's fast path answers exactly as the SDK's path does (``chit.proxy.fast``).

A raw host — this test writing JSON-RPC lines to ``chit proxy demo`` over real pipes —
sends the same 2026 requests to a proxy with the fast path and to one without
(``CHIT_PROXY_FAST=0``), both through chit's daemon to ``chit demo-server``: the answer
lines must be the same bytes. A host's ``notifications/cancelled`` cancels a request on
the fast path (no answer comes for it), and the proxy goes on serving.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import daemon_env
from tests.proxy_support import PYTHON, demo_args, proxy_home

pytestmark = pytest.mark.timeout(240)

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-host", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class RawHost:
    """Lines to and from a ``chit proxy`` process."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.raw: dict[Any, bytes] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" in msg and "method" not in msg:
                self.raw[msg["id"]] = line
            self.lines.put(msg)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any]) -> None:
        body = dict(params)
        body["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": body})

    def answer(self, rid: int, timeout: float = 180) -> bytes:
        """The answer line for ``rid`` (waiting for it with a deadline)."""
        deadline = time.monotonic() + timeout
        while rid not in self.raw:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer for {rid}"
            try:
                self.lines.get(timeout=left)
            except queue.Empty:
                continue
        return self.raw[rid]


@contextmanager
def raw_proxy(home: Path, **env: str) -> Iterator[RawHost]:
    proc = subprocess.Popen(
        [PYTHON, "-m", "chit", "proxy", "demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=daemon_env(home, **env),
    )
    try:
        yield RawHost(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


def _exchange(host: RawHost) -> list[bytes]:
    """The same requests for both proxies; their answer lines."""
    host.request(1, "tools/list", {})  # the full path: the proxy learns the tools
    host.answer(1)
    host.request(2, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}})
    host.request(3, "tools/call", {"name": "greet", "arguments": {"name": 7}})  # invalid
    host.request(4, "resources/read", {"uri": "chit-demo://nothing"})
    host.request(5, "tools/call", {"name": "no_such_tool", "arguments": {}})
    return [host.answer(i) for i in (2, 3, 4, 5)]


def test_the_fast_path_answers_as_the_full_path(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        with raw_proxy(home) as fast:
            quick = _exchange(fast)
        with raw_proxy(home, CHIT_PROXY_FAST="0") as slow:
            full = _exchange(slow)
        assert b"Ada" in quick[0]
        assert quick == full


def test_a_cancelled_request_on_the_fast_path_gets_no_answer(tmp_path: Path) -> None:
    with (
        proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home,
        raw_proxy(home) as host,
    ):
        host.request(1, "tools/list", {})
        host.answer(1)
        host.request(2, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 2}})
        host.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 2, "reason": "the user gave up"},
            }
        )
        host.request(3, "tools/call", {"name": "greet", "arguments": {"name": "Bo"}})
        assert b"Bo" in host.answer(3)
        # Started after the cancelled call and a second longer: had the cancel not
        # reached the server, call 2 would have answered first.
        host.request(4, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 3}})
        assert b"Computed job in 3 s" in host.answer(4)
        assert 2 not in host.raw
