"""``chit demo-server`` over stdio (chit's own stdout sink): how it ends, and a reader that stalls.

The demo server writes through ``chit.tasks.server.stdio`` (one writer thread, bounded
queue) instead of the SDK's per-message thread round trips. Driven here as a client
would, with raw JSON-RPC lines on a real pipe to ``python -m chit demo-server``:

- stdin EOF with a task running: the server ends, exit 0;
- each task's notifications in order, its end last, carrying its latest stored message;
- SIGTERM: the process ends (no hang on the writer thread);
- a client that stops reading while tasks run and replies pile up past the pipe and the
  sink's cap: nothing is lost or reordered — once it reads again, every reply arrives and
  each task's notifications never go back (a terminal one is its last);
- a client that goes away (stdout's reader closed): the server ends instead of hanging.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)

WAIT_S = 90.0
"""Safety net of every wait for the server process (an event, never a timing)."""
TERMINAL = {"completed", "failed", "cancelled"}


class Demo:
    """``python -m chit demo-server`` on pipes, spoken to in JSON-RPC lines (2025 handshake)."""

    def __init__(self, tmp_path: Path) -> None:
        """Start the server on a task store in ``tmp_path``."""
        self.db = tmp_path / "demo.db"
        env = {**os.environ, "CHIT_HOME": str(tmp_path / "home")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chit", "demo-server", "--db", str(self.db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader: threading.Thread | None = None

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def read_one(self) -> dict[str, Any]:
        """Read the next line synchronously (before the reader thread starts)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout"
        message: dict[str, Any] = json.loads(line)
        return message

    def handshake(self) -> None:
        """``initialize`` at 2025-11-25 with the tasks capability, then ``initialized``."""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tasks": {}},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        )
        reply = self.read_one()
        assert reply.get("id") == 0 and "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def start_task(self, request_id: int, seconds: float) -> None:
        """Ask for a ``slow_compute`` task (the reply is read later)."""
        params = {
            "name": "slow_compute",
            "arguments": {"seconds": seconds},
            "task": {"ttl": 600_000},
        }
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def start_reading(self) -> None:
        """Collect every stdout line in a thread from now on."""

        def run() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                with self._cond:
                    self.lines.append(json.loads(line))
                    self._cond.notify_all()
            with self._cond:
                self._eof = True
                self._cond.notify_all()

        self._reader = threading.Thread(target=run, daemon=True)
        self._reader.start()

    def wait_for(self, request_id: int) -> dict[str, Any]:
        """The reply to ``request_id`` (waits for it)."""
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while True:
                for message in self.lines:
                    if message.get("id") == request_id and "method" not in message:
                        return message
                assert not self._eof, f"stdout ended before the reply to {request_id}"
                assert self._cond.wait(deadline - time.monotonic()), f"no reply to {request_id}"

    def wait_eof(self) -> None:
        """Wait until stdout is closed."""
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while not self._eof:
                assert self._cond.wait(deadline - time.monotonic()), "stdout never closed"

    def stored_statuses(self) -> list[str]:
        """Every task's status in the server's store (read-only, beside the server)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as con:
            return [row[0] for row in con.execute("SELECT status FROM tasks")]

    def close(self) -> None:
        """Kill the server if it still runs (a test that failed mid-way)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a broken pipe: closing anyway
                    stream.close()


@pytest.fixture
def demo(tmp_path: Path) -> Any:
    """A started demo server, killed at the end if still running."""
    server = Demo(tmp_path)
    try:
        server.handshake()
        yield server
    finally:
        server.close()


def ping(request_id: int) -> dict[str, Any]:
    """A ``ping`` request."""
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def check_task_order(lines: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per task, the notified statuses; asserts none goes back in time or past its end."""
    seen: dict[str, list[tuple[str, str]]] = {}
    for message in lines:
        if message.get("method") != "notifications/tasks/status":
            continue
        params = message["params"]
        seen.setdefault(params["taskId"], []).append((params["lastUpdatedAt"], params["status"]))
    for task_id, states in seen.items():
        stamps = [stamp for stamp, _ in states]
        assert stamps == sorted(stamps), (task_id, states)
        ends = [i for i, (_, status) in enumerate(states) if status in TERMINAL]
        assert not ends or ends == [len(states) - 1], (task_id, states)
    return {task_id: [status for _, status in states] for task_id, states in seen.items()}


def test_eof_ends_the_server_with_a_task_running_exit_0(demo: Demo) -> None:
    # (The SDK cancels requests still in flight at EOF - their caller is gone - so only
    # replies already written are owed; those must be whole lines.)
    demo.start_reading()
    for i in range(1, 51):
        demo.send(ping(i))
    for i in range(1, 51):
        demo.wait_for(i)
    demo.start_task(100, 30)
    demo.wait_for(100)
    assert demo.proc.stdin is not None
    demo.proc.stdin.close()
    demo.wait_eof()  # no hang on the writer thread or on the running task
    assert demo.proc.wait(WAIT_S) == 0


def test_sigterm_ends_the_server(demo: Demo) -> None:
    demo.start_reading()
    demo.start_task(1, 30)
    demo.wait_for(1)
    demo.proc.send_signal(signal.SIGTERM)
    code = demo.proc.wait(WAIT_S)
    assert code in (-signal.SIGTERM, 128 + signal.SIGTERM), code
    demo.wait_eof()


def test_a_reader_that_stalls_loses_nothing_and_keeps_each_tasks_order(demo: Demo) -> None:
    # Twenty tasks end and 300 replies (tools/list, a few KiB each) pile up while the
    # client reads nothing: far more than a pipe (64 KiB) and the sink's cap (32 KiB).
    tasks = 20
    for i in range(1, tasks + 1):
        demo.start_task(i, 0.3)
    for i in range(100, 400):
        demo.send({"jsonrpc": "2.0", "id": i, "method": "tools/list"})
    deadline = time.monotonic() + WAIT_S
    while True:  # the tasks end in the store although nobody reads their replies
        statuses = demo.stored_statuses()
        if len(statuses) == tasks and set(statuses) <= TERMINAL:
            break
        assert time.monotonic() < deadline, statuses
        time.sleep(0.05)
    demo.send(ping(999))
    demo.start_reading()  # every line is parsed whole: a torn write fails here
    for request_id in [*range(1, tasks + 1), *range(100, 400), 999]:
        demo.wait_for(request_id)
    check_task_order(list(demo.lines))
    assert demo.proc.poll() is None, "the server ended while the client read slowly"


def test_notifications_of_each_task_arrive_in_order(demo: Demo) -> None:
    demo.start_reading()
    ids = []
    for i in range(1, 31):
        demo.start_task(i, 1.0)
    for i in range(1, 31):
        ids.append(demo.wait_for(i)["result"]["task"]["taskId"])
    deadline = time.monotonic() + WAIT_S
    while True:  # every task's terminal notification (a hint, but sent on a live session)
        statuses = check_task_order(list(demo.lines))
        if all(statuses.get(t, [""])[-1] in TERMINAL for t in ids):
            break
        assert time.monotonic() < deadline, statuses
        time.sleep(0.05)
    assert all(statuses[t][-1] == "completed" for t in ids), statuses
    # The end carries the task's latest message (the row as stored), never an older one.
    last = {}
    for message in demo.lines:
        if message.get("method") == "notifications/tasks/status":
            last[message["params"]["taskId"]] = message["params"].get("statusMessage")
    with sqlite3.connect(f"file:{demo.db}?mode=ro", uri=True) as con:
        stored = dict(con.execute("SELECT id, status_message FROM tasks").fetchall())
    assert {t: last[t] for t in ids} == {t: stored[t] for t in ids}


def test_a_client_that_goes_away_ends_the_server(demo: Demo) -> None:
    demo.start_task(1, 30)
    demo.read_one()  # the task exists: its notifications will follow
    assert demo.proc.stdout is not None and demo.proc.stdin is not None
    demo.proc.stdout.close()  # the client's end of stdout: writes now fail (EPIPE)
    for i in range(2, 50):  # replies to write into a closed pipe
        demo.send(ping(i))
    # stdin stays open: the failed writes alone must end the server
    assert demo.proc.wait(WAIT_S) is not None
