"""A server's question during a host's call that is not a task waits in chit's inbox.

Every end is a real process: a plain ``mcp``-SDK host (no tasks, no elicitation)
launches ``chit proxy everything`` over stdio; the proxy forwards through chit's daemon
to server-everything (a stdio child of the daemon). The host calls
``trigger-elicitation-request`` — a tool that cannot be a task, which asks
``elicitation/create`` during the call. The question waits in chit's inbox under a
receipt for the call, and another process answers (``chit answer``, through the daemon)
or cancels it (``chit cancel``); or the host gives up first.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult

from tests.daemon_support import children, chit, daemon_env, daemon_pid, wait_gone
from tests.proxy_support import (
    PYTHON,
    everything_args,
    proxy_home,
    question_waits,
    show,
    wait_receipt,
)

pytestmark = pytest.mark.timeout(240)

TOOL = "trigger-elicitation-request"


def _params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "proxy", "everything"], env=daemon_env(home)
    )


def _waiting(home: Path) -> dict[str, Any]:
    """The call's receipt once its question waits in chit's inbox."""
    return wait_receipt(home, question_waits, server="everything")


def test_a_question_outside_a_task_is_answered_in_chit(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        env = daemon_env(home)
        seen: dict[str, Any] = {}
        messages: list[str] = []

        def person() -> None:
            row = _waiting(home)
            seen["rid"] = row["receipt_id"]
            seen["bad"] = chit("answer", row["receipt_id"], "--json", '{"check": 1}', env=env)
            seen["ran"] = chit("answer", row["receipt_id"], "--json", '{"name": "Ada"}', env=env)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")

        async def host() -> Any:
            async with (
                Client(_params(home), mode="legacy", read_timeout_seconds=120) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(anyio.to_thread.run_sync, person)
                return await client.call_tool(TOOL, {}, progress_callback=on_progress)

        result = anyio.run(host)
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error is False and "Ada" in texts, texts
        bad = seen["bad"]
        assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1, bad  # schema: no
        assert seen["ran"].code == 0, seen["ran"].err
        rid = seen["rid"]
        assert any(rid in m for m in messages), messages  # the host was told where
        detail = show(home, rid)
        assert detail["state"] == "completed" and detail["synchronous"] is True
        assert detail["tool"] == TOOL and detail["host"]["name"], detail
        assert [q["answer_status"] for q in detail["input_requests"]] == ["answered"]
        again = chit("answer", rid, "--json", '{"name": "Bob"}', env=env)
        assert again.code != 0 and len(again.err.strip().splitlines()) == 1, again


def test_a_host_that_gives_up_leaves_a_cancelled_receipt(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        env = daemon_env(home)
        seen: dict[str, Any] = {}
        asked = threading.Event()

        def person() -> None:
            seen["rid"] = _waiting(home)["receipt_id"]
            asked.set()

        async def host() -> None:
            async with Client(_params(home), mode="legacy", read_timeout_seconds=120) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(anyio.to_thread.run_sync, person)
                    with anyio.CancelScope() as scope:

                        async def give_up() -> None:
                            await anyio.to_thread.run_sync(asked.wait, 60)
                            scope.cancel()  # the SDK sends notifications/cancelled

                        tg.start_soon(give_up)
                        await client.call_tool(TOOL, {})
                # The proxy serves on: a call after the cancelled one still works.
                tools = await client.list_tools()
                assert any(t.name == TOOL for t in tools.tools)

        anyio.run(host)
        rid = seen["rid"]
        row = wait_receipt(home, lambda r: r["receipt_id"] == rid and r["state"] == "cancelled")
        detail = show(home, row["receipt_id"])
        assert detail["host"]["left_at"], detail
        assert [q["answer_status"] for q in detail["input_requests"]] == ["lost"]
        late = chit("answer", rid, "--json", '{"name": "Ada"}', env=env)
        assert late.code != 0 and len(late.err.strip().splitlines()) == 1, late


def test_chit_cancel_stops_the_waiting_call(tmp_path: Path) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        env = daemon_env(home)
        seen: dict[str, Any] = {}

        def person() -> None:
            seen["rid"] = _waiting(home)["receipt_id"]
            seen["ran"] = chit("cancel", seen["rid"], env=env)

        async def host() -> None:
            async with (
                Client(_params(home), mode="legacy", read_timeout_seconds=120) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(anyio.to_thread.run_sync, person)
                with pytest.raises(MCPError):
                    await client.call_tool(TOOL, {})

        anyio.run(host)
        assert seen["ran"].code == 0, seen["ran"].err
        rid = seen["rid"]
        row = wait_receipt(home, lambda r: r["receipt_id"] == rid and r["state"] == "cancelled")
        assert show(home, row["receipt_id"])["cancel"]["posture"] != "none"


@pytest.mark.parametrize("setting", ["chit", "both"])
def test_prompts_chit_or_both_put_the_question_in_the_inbox(tmp_path: Path, setting: str) -> None:
    with proxy_home(tmp_path, everything=everything_args()) as home:
        config = home / "config.toml"
        config.write_text(config.read_text() + f'prompts = "{setting}"\n')
        env = daemon_env(home)
        asked = threading.Event()
        seen: dict[str, Any] = {}

        async def elicit(
            context: ClientRequestContext, params: ElicitRequestParams
        ) -> ElicitResult:
            asked.set()
            await anyio.sleep_forever()  # chit answers first: this question is withdrawn
            raise AssertionError("unreachable")

        def person() -> None:
            row = _waiting(home)
            seen["rid"] = row["receipt_id"]
            if setting == "both":
                assert asked.wait(60), "the host was never asked"
            seen["ran"] = chit("answer", row["receipt_id"], "--json", '{"name": "Ada"}', env=env)

        async def host() -> Any:
            async with (
                Client(
                    _params(home),
                    mode="legacy",
                    read_timeout_seconds=120,
                    elicitation_callback=elicit,
                ) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(anyio.to_thread.run_sync, person)
                return await client.call_tool(TOOL, {})

        result = anyio.run(host)
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error is False and "Ada" in texts, texts
        assert seen["ran"].code == 0, seen["ran"].err
        assert asked.is_set() is (setting == "both")
        assert show(home, seen["rid"])["state"] == "completed"


def test_a_question_left_by_a_killed_daemon_ends_when_the_next_daemon_starts(
    tmp_path: Path,
) -> None:
    """The question died with its daemon: the next daemon says so, in words, at once."""
    with proxy_home(tmp_path, everything=everything_args()) as home:
        env = daemon_env(home)
        seen: dict[str, Any] = {}

        def person() -> None:
            seen["rid"] = _waiting(home)["receipt_id"]
            pid = daemon_pid(home)
            assert pid is not None
            tree = children(pid)
            os.kill(pid, signal.SIGKILL)
            seen["left"] = wait_gone([pid], 30)
            # server-everything does not exit when its stdin closes: this test started it
            # (through the daemon it killed), so it ends it.
            for left in wait_gone(tree, 5):
                os.kill(left, signal.SIGKILL)

        async def host() -> BaseException | None:
            try:
                async with (
                    Client(_params(home), mode="legacy", read_timeout_seconds=120) as client,
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(anyio.to_thread.run_sync, person)
                    await client.call_tool(TOOL, {})
            except BaseException as exc:  # the proxy ended with its daemon
                return exc
            return None

        failed = anyio.run(host)
        assert failed is not None, "the host's call returned although its daemon was killed"
        assert seen.get("left") == [], seen
        rid = seen["rid"]
        assert show(home, rid)["state"] == "input_required"  # nobody has looked yet
        started = chit("daemon", "start", env=env)
        assert started.code == 0, started.err
        detail = show(home, rid)  # ended before the daemon served its first request
        assert detail["state"] == "failed", detail
        assert [q["answer_status"] for q in detail["input_requests"]] == ["lost"]
        assert "can no longer be answered" in detail["status_message"], detail
        assert "check the server" in detail["status_message"], detail
        assert detail["host"]["left_at"], detail
        late = chit("answer", rid, "--json", '{"name": "Ada"}', env=env)
        assert late.code == 8 and len(late.err.strip().splitlines()) == 1, late
        assert "failed" in late.err and "Traceback" not in late.err, late
