"""A host restart does not lose its tasks: the sessions and receipts live in chit.

An ``mcp``-SDK host process starts a task through ``chit proxy`` and is SIGKILLed. The
task runs on (the server's session belongs to chit's daemon, not to the host or its
proxy). A new host process, through a new proxy, asks for the task by the same id and
gets its status and result; the receipt shows the whole timeline. Over stdio for both
servers: ``chit demo-server`` and (interop) server-everything, whose tasks live only in
its one session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import daemon_env, daemon_pid
from tests.proxy_support import (
    PYTHON,
    demo_args,
    everything_args,
    proxy_home,
    receipts,
    show,
    wait_receipt,
)

pytestmark = pytest.mark.timeout(1200)

HOST = Path(__file__).parent / "fixtures" / "proxy" / "sdk_host.py"
WAIT_S = 300
"""Safety net of a wait for another process (the host waits up to this for each request)."""


def _host(home: Path, server: str, *args: str) -> subprocess.Popen[str]:
    proxy = [PYTHON, "-m", "chit", "proxy", server]
    return subprocess.Popen(
        [PYTHON, str(HOST), *args, "--", *proxy],
        env=daemon_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _restart(
    home: Path, server: str, mode: str, tool: str, arguments: dict[str, object]
) -> dict[str, Any]:
    first = _host(home, server, "start", mode, tool, json.dumps(arguments))
    assert first.stdout is not None
    line = first.stdout.readline()  # the host printed the task id: the task exists
    assert line, first.communicate(timeout=WAIT_S)[1][-3000:]
    task_id = json.loads(line)["task_id"]
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=WAIT_S)

    second = _host(home, server, "finish", mode, task_id)
    out, err = second.communicate(timeout=2 * WAIT_S)
    assert second.returncode == 0, err[-3000:]
    done: dict[str, Any] = json.loads(out)
    assert done["status"] == "completed", done
    return done


def _timeline_ok(home: Path, tool: str) -> None:
    # The host has the result; the daemon may still be writing the receipt's end.
    ended = ("completed", "failed", "cancelled")
    row = wait_receipt(home, lambda r: r["tool"] == tool and r["state"] in ended, timeout=WAIT_S)
    assert len([r for r in receipts(home) if r["tool"] == tool]) == 1
    assert row["state"] == "completed", row
    detail = show(home, row["receipt_id"])
    timeline = detail["timeline"]
    assert timeline[0]["source"] == "create"
    assert any(t["kind"] == "result" for t in timeline)
    assert len(timeline) >= 3  # created, observed working, completed with its result


def test_host_killed_new_host_gets_the_result_demo(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        done = _restart(home, "demo", "legacy", "slow_compute", {"seconds": 4, "label": "r"})
        assert done["text"] == "Computed r in 4 s"
        _timeline_ok(home, "slow_compute")


@pytest.mark.interop
def test_host_killed_new_host_gets_the_result_everything(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        done = _restart(home, "everything", "legacy", "simulate-research-query", {"topic": "k"})
        assert "Research Report: k" in done["text"]
        _timeline_ok(home, "simulate-research-query")


def test_the_proxy_exits_when_its_daemon_dies(tmp_path: Path) -> None:
    """A proxy cannot serve without its daemon: it ends (exit 6, one line), and the host
    starts a new one, which starts a new daemon."""
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        proxy = subprocess.Popen(
            [PYTHON, "-m", "chit", "proxy", "demo"],
            env=daemon_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proxy.stdin is not None and proxy.stdout is not None
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw-host", "version": "1"},
            },
        }
        proxy.stdin.write(json.dumps(hello) + "\n")
        proxy.stdin.flush()
        reply = json.loads(proxy.stdout.readline())  # attached: the daemon runs
        assert reply["result"]["serverInfo"]["name"] == "chit-demo"
        pid = daemon_pid(home)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        proxy.wait(timeout=WAIT_S)  # stdin stays open: the proxy ends by itself
        _, err = proxy.communicate(timeout=10)
        assert proxy.returncode == 6, err[-2000:]
        assert err.strip().splitlines()[-1].startswith("chit: chit's daemon went away")
        # The next proxy (as a restarted host would start it) starts a new daemon.
        done = _restart(home, "demo", "legacy", "slow_compute", {"seconds": 1, "label": "n"})
        assert done["text"] == "Computed n in 1 s"
