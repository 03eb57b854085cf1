"""Third-party clients against the sidecar: the MCP Inspector CLI and the conformance suite.

* ``@modelcontextprotocol/inspector@2.12.0 --cli`` drives the **stdio** sidecar
  (``work_start`` then ``work_note``) and gets the documented shapes.
* ``@modelcontextprotocol/conformance@0.1.16 server`` (active suite) against the HTTP
  sidecar (``--no-auth``: the harness sends no bearer token) exits 0 with
  ``tests/fixtures/sidecar/conformance-baseline.yml`` naming each expected failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import peers
from tests.sidecar_support import PYTHON, env_for, make_home, start_http, stop

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

BASELINE = Path(__file__).parent / "fixtures" / "sidecar" / "conformance-baseline.yml"


def _peer_bin(peer: peers.Peer, name: str) -> Path:
    if shutil.which("npm") is None and not peer.installed():
        pytest.skip("npm is not on the PATH: the interop peers need Node.js 22 from npm")
    try:
        peers.node22()
        return peers.bin_path(peer, name)
    except (peers.PeerUnavailable, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot install {peer.spec}: {exc}")


def _inspector(home: Any, *args: str, rc: int = 0) -> dict[str, Any]:
    binary = _peer_bin(peers.INSPECTOR, "mcp-inspector")
    # The inspector starts the server with a minimal environment: pass chit's explicitly.
    chit_env = [f"{k}={v}" for k, v in env_for(home).items() if k.startswith("CHIT_")]
    env = {**peers.node22_env(), "HOME": str(home.root)}  # its catalog goes to a scratch HOME
    flags = [part for pair in chit_env for part in ("-e", pair)]
    # The inspector gives a server 15 s to connect by default; a sidecar start outlasted that
    # in a parallel run at load 9. The bound is a safety net (the run has its own timeout).
    connect = ["--connect-timeout", "300000"]
    command = [str(binary), "--cli", *connect, *flags, PYTHON, "-m", "chit", "sidecar"]
    proc = subprocess.run(
        [*command, "--method", "tools/call", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == rc, proc.stderr[-3000:]  # 5: the tool answered isError
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_inspector_cli_drives_stdio_sidecar(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    start = _inspector(
        home, "--tool-name", "work_start", "--tool-arg", "task_key=t1", "--tool-arg", "title=Hi"
    )
    body = start["structuredContent"]
    assert start["isError"] is False
    assert body["contract"] == "chit.work/1" and body["state"] == "queued"
    assert body["materialized"] is False and body["item_id"].startswith("wi_")
    assert json.loads(start["content"][0]["text"]) == body
    item = body["item_id"]
    note = _inspector(
        home, "--tool-name", "work_note", "--tool-arg", f"item_id={item}", "--tool-arg", "text=hey"
    )
    assert note["isError"] is False and note["structuredContent"]["item_id"] == item
    assert note["structuredContent"]["state"] in ("queued", "applied")
    bad = _inspector(
        home,
        "--tool-name",
        "work_status",
        "--tool-arg",
        f"item_id={item}",
        "--tool-arg",
        "status=x",
        rc=5,
    )
    assert bad["isError"] is True and "chit.work/1" in bad["structuredContent"]["reason"]


def test_conformance_active_suite_with_baseline(tmp_path: Path) -> None:
    binary = _peer_bin(peers.CONFORMANCE_STABLE, "conformance")
    home = make_home(tmp_path)
    proc, url = start_http(home, "--no-auth")
    try:
        run = subprocess.run(
            [
                str(binary),
                "server",
                "--url",
                url,
                "--expected-failures",
                str(BASELINE),
                "-o",
                str(tmp_path / "results"),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            env=peers.node22_env(),
            stdin=subprocess.DEVNULL,
        )
    finally:
        stop(proc)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
