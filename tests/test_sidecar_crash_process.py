"""SIGKILL the real ``chit sidecar`` process during ``work_start`` calls, in a loop.

An MCP client (JSON-RPC over the process's stdio, pipelined) sends ``work_start`` with a
fresh idempotency key per call; a key counts as acknowledged only once its reply
arrived. Each round kills the process with SIGKILL 0.05-0.25 s into the calls, then
checks ``quick_check``, that no acknowledged start was lost, and that there is no orphan
anchor or intent and no duplicate (principal, idempotency key). The next process first
retries every unacknowledged call with the same key: it returns the item id that was
committed, or creates exactly one. The next rounds' processes are started while the current
one runs (their executors share the queue — leases again). CI runs 15 rounds (each a
process start, about a second of CPU), ``CHIT_NIGHTLY=1`` 50, ``CHIT_CRASH_ROUNDS`` sets it.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from tests.sidecar_support import check_crash_invariants, make_home, spawn_stdio, sqlite_db

ROUNDS = int(os.environ.get("CHIT_CRASH_ROUNDS", "50" if os.environ.get("CHIT_NIGHTLY") else "15"))
IN_FLIGHT = 4
WARM = 3
PRINCIPAL = "local"  # stdio has the one local principal

WAIT_S = 300.0
"""Safety net of each wait for the other process (a reply, its start, its end): at load 12
a Python process's start alone takes 10+ s, and WARM of them start at once. Every wait
also ends at once when the process is gone (the reader puts None)."""

pytestmark = pytest.mark.timeout(max(900, ROUNDS * 30))


class Sidecar:
    """A ``chit sidecar`` process and a minimal pipelined MCP client on its stdio."""

    def __init__(self, home: Home) -> None:
        self.proc = spawn_stdio(home)
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "crash-test", "version": "1"},
            },
        )
        self._ready = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.replies.put(json.loads(line))
            except ValueError:
                continue
        self.replies.put(None)  # end of stream: the process is gone

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        return self._next

    def ready(self, timeout: float = WAIT_S) -> None:
        """Wait for the initialize reply (once), then complete the handshake."""
        if self._ready:
            return
        reply = self.replies.get(timeout=timeout)
        assert reply is not None and reply.get("id") == 1 and "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._ready = True

    def start(self, key: str) -> int:
        args = {"task_key": "task-" + key, "title": "T " + key, "idempotency_key": key}
        return self.request("tools/call", {"name": "work_start", "arguments": args})

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT_S)
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # stdout is drained to EOF by the reader thread


def _item_of(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert not result.get("isError"), result
    data = result["structuredContent"]
    assert data["state"] in ("queued", "applied") or data["replayed"], data
    return str(data["item_id"])


def _retry(sc: Sidecar, keys: list[str], db_path: Path) -> dict[str, str]:
    """Re-send unacknowledged calls with the same key; their ids must match the store."""
    with SidecarStore.open(db_path) as store:
        before = {
            k: i
            for k, i in sqlite_db(store)
            .execute("SELECT idempotency_key, item_id FROM intents WHERE kind = 'start'")
            .fetchall()
        }
    ids = {sc.start(key): key for key in keys}
    got: dict[str, str] = {}
    while len(got) < len(ids):
        reply = sc.replies.get(timeout=WAIT_S)
        assert reply is not None, "the sidecar died during the retries"
        if reply.get("id") in ids:
            key = ids[reply["id"]]
            got[key] = _item_of(reply)
            if key in before:  # committed before the kill: the same item id comes back
                assert got[key] == before[key], (key, got[key], before[key])
    return got


def _load(sc: Sidecar, prefix: str, rng: random.Random) -> tuple[dict[str, str], set[str]]:
    """Pipelined work_start calls until SIGKILL; return (acknowledged, unacknowledged)."""
    acked: dict[str, str] = {}
    sent: dict[int, str] = {}
    n = 0
    kill_at: float | None = None
    killed = False
    while True:
        while not killed and len(sent) - len(acked) < IN_FLIGHT:
            key = f"{prefix}-{n}"
            n += 1
            sent[sc.start(key)] = key
        try:
            reply = sc.replies.get(timeout=0.02)
        except queue.Empty:
            reply = {}
        if reply is None:  # end of stream; replies read before it were acknowledged
            break
        if reply.get("id") in sent:
            acked[sent[reply["id"]]] = _item_of(reply)
            if kill_at is None:  # the process is warm: start the clock
                kill_at = time.monotonic() + rng.uniform(0.05, 0.25)
        if not killed and kill_at is not None and time.monotonic() >= kill_at:
            sc.kill()
            killed = True
    return acked, set(sent.values()) - set(acked)


def test_sigkill_sidecar_process_during_work_start(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    db_path = home.sidecar_db_path
    SidecarStore.open(db_path).close()
    rng = random.Random(2026)
    acked: dict[tuple[str, str], str] = {}
    unacked: set[str] = set()
    retried = 0
    # Processes warm up (~1 s of imports) ahead of their round, WARM at a time.
    spares = deque(Sidecar(home) for _ in range(WARM))
    began = time.monotonic()
    try:
        for rnd in range(ROUNDS + 1):
            current = spares.popleft()
            if rnd + WARM <= ROUNDS:
                spares.append(Sidecar(home))
            current.ready()
            for key, item in _retry(current, sorted(unacked), db_path).items():
                acked[(PRINCIPAL, key)] = item
            retried += len(unacked)
            check_crash_invariants(db_path, acked)
            if rnd == ROUNDS:  # the last process only retried
                current.kill()
                break
            got, unacked = _load(current, f"r{rnd}", rng)
            acked.update({(PRINCIPAL, k): v for k, v in got.items()})
            check_crash_invariants(db_path, acked)
    finally:
        for spare in spares:
            spare.kill()
    elapsed = time.monotonic() - began
    with SidecarStore.open(db_path) as store:
        starts = (
            sqlite_db(store).execute("SELECT count(*) FROM intents WHERE kind = 'start'").fetchone()
        )
    # Every start the store holds was acknowledged (directly or by its retry): nothing extra.
    assert int(starts[0]) == len(acked)
    assert len(acked) > ROUNDS * IN_FLIGHT and retried > 0
    print(f"{ROUNDS} rounds, {len(acked)} starts, {retried} retried, {elapsed:.1f} s")
