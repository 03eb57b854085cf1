"""``chit proxy`` ends quietly the way hosts end a stdio server: stdin closed, or SIGTERM.

Hosts keep (and some show) a server's stderr, so a proxy that stops normally writes
nothing there and exits 0 — with the engine in process (``--no-daemon``) or through the
daemon, with a held call in flight (its receipt notes that the host stopped waiting).
The proxy is a real process spoken to over its stdio, as a host would.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_support import daemon_env
from tests.proxy_support import PYTHON, demo_args, proxy_home, wait_receipt

pytestmark = pytest.mark.timeout(180)


class _Host:
    """A minimal 2025-11-25 host without tasks: JSON lines over the proxy's pipes."""

    def __init__(self, home: Path, *global_opts: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "chit", *global_opts, "proxy", "demo"],
            env=daemon_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 0

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the proxy closed its stdout"
        data: dict[str, Any] = json.loads(line)
        return data

    def start(self) -> None:
        info = {"name": "quiet-host", "version": "1.0"}
        self.send(
            "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        )
        assert "result" in self.read()
        self.send("notifications/initialized", notify=True)
        self.send("tools/list")
        assert "tools" in self.read()["result"]

    def hold_a_call(self) -> None:
        """Start a plain call of a task tool; return once the proxy holds it (progress)."""
        args = {"seconds": 30, "label": "q"}
        meta = {"progressToken": "t1"}
        self.send("tools/call", {"name": "slow_compute", "arguments": args, "_meta": meta})
        note = self.read()
        assert note["method"] == "notifications/progress", note
        assert "chit receipt" in note["params"]["message"]

    def end(self, how: str) -> tuple[int, str]:
        """Stop the proxy as a host does (``eof`` or ``sigterm``); its exit code and stderr."""
        if how == "sigterm":
            self.proc.send_signal(signal.SIGTERM)
        _out, err = self.proc.communicate(timeout=60)  # closes stdin: EOF
        return self.proc.returncode, err.decode(errors="replace")


@pytest.mark.parametrize(
    ("global_opts", "how"),
    [(("--no-daemon",), "eof"), (("--no-daemon",), "sigterm"), ((), "sigterm")],
    ids=["no-daemon-eof", "no-daemon-sigterm", "daemon-sigterm"],
)
def test_the_proxy_ends_quietly_with_a_call_in_flight(
    tmp_path: Path, global_opts: tuple[str, ...], how: str
) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        host = _Host(home, *global_opts)
        try:
            host.start()
            host.hold_a_call()
            code, err = host.end(how)
        finally:
            if host.proc.poll() is None:
                host.proc.kill()
                host.proc.wait()
        assert code == 0 and err == "", err
        row = wait_receipt(
            home, lambda r: (r["host"] or {}).get("left_at") is not None, server="demo"
        )
        assert row["host"]["name"] == "quiet-host"
        assert row["cancel"]["posture"] == "not_requested"


def test_the_proxy_ends_quietly_when_the_host_closes_stdin(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        host = _Host(home)
        try:
            host.start()
            code, err = host.end("eof")
        finally:
            if host.proc.poll() is None:
                host.proc.kill()
                host.proc.wait()
        assert code == 0 and err == "", err
