"""Hosts without task support: a call of a task tool is held open, and survives the host.

* An ``mcp``-SDK host with no tasks and no elicitation calls ``confirm_delete`` through
  ``chit proxy``: the call becomes a task on the server, its prompt waits in chit's
  inbox, ``chit answer`` (another process, through the daemon) answers it, and the
  host's call returns the result.
* A TypeScript-SDK host whose request timeout is shorter than the task still gets the
  result: the proxy keeps its request alive with progress notifications.
* A host that gives up (timeout, no reset on progress) leaves a receipt that notes it and
  completes anyway; the agent fetches the result later through ``chit sidecar``'s
  ``receipt_result`` (a real sidecar process), by the receipt id its progress messages
  named.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import RequestParamsMeta

from tests import peers
from tests.daemon_support import chit, daemon_env
from tests.proxy_support import PYTHON, demo_args, proxy_home, question_waits, show, wait_receipt

pytestmark = pytest.mark.timeout(300)

TS_HOST = Path(__file__).parent / "fixtures" / "proxy" / "ts_host.mjs"


def test_host_without_tasks_gets_its_answer_from_chits_inbox(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        env = daemon_env(home)
        params = StdioServerParameters(
            command=PYTHON, args=["-m", "chit", "proxy", "demo"], env=env
        )
        answered: dict[str, Any] = {}

        def answer_in_chit() -> None:
            row = wait_receipt(home, question_waits, server="demo")
            answered["row"] = row
            ran = chit("answer", row["receipt_id"], "--json", '{"confirm": true}', env=env)
            assert ran.code == 0, ran.err

        async def host() -> Any:
            # No elicitation callback: the host cannot be asked; no tasks either.
            async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(anyio.to_thread.run_sync, answer_in_chit)
                    result = await client.call_tool(
                        "confirm_delete",
                        {"filename": "x.txt"},
                        # an open TypedDict (extra_items): any key is allowed; mypy can't see it
                        meta=cast(RequestParamsMeta, {"io.github.chit/work": "wi_proxytest"}),
                    )
                return result

        result = anyio.run(host)
        assert result.is_error is False
        assert result.content[0].text == "Deleted x.txt"
        row = answered["row"]
        assert row["tool"] == "confirm_delete"
        assert row["work_ref"] == "wi_proxytest"  # the sidecar work item named in _meta
        assert row["host"]["name"]  # the SDK host's clientInfo
        detail = show(home, row["receipt_id"])
        assert detail["state"] == "completed"
        assert "input_answered" in [t["kind"] for t in detail["timeline"]]


def _ts_host(home: Path, mode: str, tool: str, args: dict[str, Any], timeout_ms: int) -> Any:
    if not peers.EVERYTHING.installed():
        pytest.skip("server-everything (and its TypeScript SDK) is not installed")
    node = peers.node22()
    sdk = peers.EVERYTHING.prefix / "node_modules" / "@modelcontextprotocol" / "sdk"
    env = daemon_env(home, MCP_TS_SDK=str(sdk), CHIT_PROXY_HEARTBEAT_S="0.5")
    proxy = [PYTHON, "-m", "chit", "proxy", "demo"]
    proc = subprocess.run(
        [str(node), str(TS_HOST), mode, tool, json.dumps(args), str(timeout_ms), "--", *proxy],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.interop
def test_progress_keeps_a_short_request_timeout_alive(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        out = _ts_host(home, "reset", "slow_compute", {"seconds": 6, "label": "p"}, 2000)
        assert out["ok"], out
        assert out["result"]["content"][0]["text"] == "Computed p in 6 s"
        assert out["progress"] >= 3  # the host heard progress, so its 2 s timeout kept resetting
        row = wait_receipt(home, lambda r: r["tool"] == "slow_compute", server="demo")
        assert row["host"]["name"] == "ts-host" and row["host"]["version"] == "9.9.9"
        assert row["host"].get("left_at") is None  # it waited to the end


@pytest.mark.interop
def test_a_host_that_gives_up_leaves_a_receipt_that_completes(tmp_path: Path) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        out = _ts_host(home, "strict", "slow_compute", {"seconds": 5, "label": "g"}, 1500)
        assert not out["ok"] and "timed out" in out["error"].lower(), out
        row = wait_receipt(
            home,
            lambda r: r["state"] == "completed" and (r["host"] or {}).get("left_at"),
            server="demo",
        )
        assert row["cancel"]["posture"] == "not_requested"  # giving up cancels nothing
        detail = show(home, row["receipt_id"])
        notes = [t for t in detail["timeline"] if t["kind"] == "host"]
        assert len(notes) == 1 and "ts-host 9.9.9 stopped waiting" in notes[0]["message"]
        assert detail["outcome"]["summary"] == "Computed g in 5 s"
        # The agent learned the receipt id from the progress it heard before giving up.
        named = re.search(r"chit receipt (\S+)\)", out["message"] or "")
        assert named is not None and named.group(1) == row["receipt_id"], out
        later = anyio.run(_sidecar_result, home, row["receipt_id"])
        assert later["result"]["state"] == "completed"
        assert later["result"]["outcome"]["summary"] == "Computed g in 5 s"
        assert later["status"]["state"] == "completed"
        assert later["cancel_error"] and "chit proxy" in later["cancel"]["reason"]
        assert later["unknown"] == {**later["unknown"], "reason": "unknown receipt_id"}


async def _sidecar_result(home: Path, receipt_id: str) -> dict[str, Any]:
    """Ask a real ``chit sidecar`` (stdio, through the daemon) about ``receipt_id``."""
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "sidecar"], env=daemon_env(home)
    )
    out: dict[str, Any] = {}
    async with Client(params) as client:
        for tool in ("receipt_result", "receipt_status", "receipt_cancel"):
            answer = await client.call_tool(tool, {"receipt_id": receipt_id})
            out[tool.removeprefix("receipt_")] = answer.structured_content
            if tool == "receipt_cancel":
                out["cancel_error"] = answer.is_error
        unknown = await client.call_tool("receipt_result", {"receipt_id": "r_nope"})
        out["unknown"] = unknown.structured_content
    return out


@pytest.mark.interop
@pytest.mark.parametrize("setting", ["confirm", "cancel"])
def test_a_hosts_cancel_cancels_the_task_only_when_confirmed_or_configured(
    tmp_path: Path, setting: str
) -> None:
    """``host_cancel = "confirm"`` (the default): the host gives up, the task runs on
    until a person cancels it in chit (``chit cancel``). ``"cancel"``: the host's giving
    up (its SDK sends ``notifications/cancelled`` on timeout) cancels the task."""
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        if setting == "cancel":
            config = home / "config.toml"
            config.write_text(config.read_text() + 'host_cancel = "cancel"\n')
        out = _ts_host(home, "strict", "slow_compute", {"seconds": 60, "label": "c"}, 1500)
        assert not out["ok"] and "timed out" in out["error"].lower(), out
        row = wait_receipt(home, lambda r: (r["host"] or {}).get("left_at"), server="demo")
        rid = row["receipt_id"]
        if setting == "confirm":
            assert row["state"] == "working" and row["cancel"]["posture"] == "not_requested"
            ran = chit("cancel", rid, env=daemon_env(home))  # the person confirms in chit
            assert ran.code == 0, ran.err
        done = wait_receipt(
            home, lambda r: r["receipt_id"] == rid and r["state"] == "cancelled", server="demo"
        )
        assert done["cancel"]["posture"] in ("acknowledged", "observed")
