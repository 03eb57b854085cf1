"""A real third-party host: the MCP Inspector 2.12.0 CLI through ``chit proxy everything``.

The inspector launches ``chit proxy everything`` as it would launch server-everything
2026.8.31 itself, and every answer matches what it gets directly: the tool list, plain
tools, resources and prompts, and the task tool ``simulate-research-query`` (through the
proxy chit's own task id comes back in the related-task ``_meta``; the content is the
same). The task leaves a receipt naming the inspector as its host.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import peers
from tests.daemon_support import daemon_env
from tests.proxy_support import PYTHON, everything_args, proxy_home, wait_receipt

pytestmark = [pytest.mark.interop, pytest.mark.timeout(1800)]

WAIT_S = 300
"""Safety net of one inspector run: at load 12 the proxy's start (a Python process) and
the daemon's start it triggers take 10+ s each, beyond the inspector's own 15 s connect."""


def _inspector() -> Path:
    try:
        peers.node22()
        return peers.bin_path(peers.INSPECTOR, "mcp-inspector")
    except (peers.PeerUnavailable, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot install the inspector: {exc}")


def _run(home: Path, server: list[str], *method: str) -> Any:
    env = {**peers.node22_env(), "HOME": str(home)}  # the inspector's catalog: a scratch HOME
    chit_env = [
        part
        for key, value in daemon_env(home).items()
        if key.startswith("CHIT_")
        for part in ("-e", f"{key}={value}")
    ]
    proc = subprocess.run(
        [
            str(_inspector()),
            "--cli",
            *("--connect-timeout", str(WAIT_S * 1000)),
            *chit_env,
            *server,
            "--method",
            *method,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S + 60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _research_ended(row: dict[str, Any]) -> bool:
    ended = ("completed", "failed", "cancelled")
    return bool(row["tool"] == "simulate-research-query" and row["state"] in ended)


def _strip_task_meta(result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result)
    meta = dict(out.pop("_meta", None) or {})
    meta.pop("io.modelcontextprotocol/related-task", None)
    if meta:
        out["_meta"] = meta
    return out


def test_inspector_cli_through_the_proxy_matches_direct(tmp_path: Path) -> None:
    everything = everything_args()
    direct = [everything[1], everything[3], everything[5]]  # node, dist/index.js, stdio
    with proxy_home(tmp_path, everything=everything) as home:
        proxied = [PYTHON, "-m", "chit", "proxy", "everything"]
        # server-everything lists some tools only to clients with a capability (roots,
        # elicitation): through the proxy it sees chit's session, so those differ.
        via_chit = {t["name"]: t for t in _run(home, proxied, "tools/list")["tools"]}
        straight = {t["name"]: t for t in _run(home, direct, "tools/list")["tools"]}
        capability_bound = {
            "get-roots-list",
            "trigger-elicitation-request",
            "trigger-url-elicitation",
        }
        assert set(via_chit) ^ set(straight) <= capability_bound
        common = set(via_chit) & set(straight)
        assert len(common) >= 10 and "simulate-research-query" in common
        assert {n: via_chit[n] for n in common} == {n: straight[n] for n in common}
        calls: list[tuple[str, ...]] = [
            ("tools/call", "--tool-name", "echo", "--tool-arg", "message=hello"),
            ("tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=3"),
            ("resources/list",),
            ("prompts/list",),
        ]
        for call in calls:
            assert _run(home, proxied, *call) == _run(home, direct, *call), call

        research: tuple[str, ...] = ("tools/call", "--tool-name", "simulate-research-query")
        research += ("--tool-arg", "topic=inspector")
        via_task = _run(home, proxied, *research)
        direct_task = _run(home, direct, *research)
        assert _strip_task_meta(via_task) == _strip_task_meta(direct_task)
        assert "Research Report: inspector" in via_task["content"][0]["text"]
        assert "io.modelcontextprotocol/related-task" in via_task["_meta"]  # chit's task id

        # The daemon may still be writing the receipt's end when the host has its result.
        row = wait_receipt(home, _research_ended, timeout=WAIT_S, server="everything")
        assert row["state"] == "completed", row
        assert row["protocol"] == "2025-11-25"
        assert row["host"]["name"]  # the inspector's clientInfo
