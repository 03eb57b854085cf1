"""Who answers the server's questions for a host's task: ``prompts = host | chit | both``.

A real ``mcp``-SDK host that declared elicitation (but no tasks) calls ``confirm_delete``
through ``chit proxy``; the call is held open as a task on ``chit demo-server``, whose
question goes, by the server's ``prompts`` setting:

* ``host`` — to the host only while it waits: ``chit answer`` (another process, through
  the daemon) is refused with one line, and the host's answer completes the call;
* ``both`` — to the host and to chit's inbox: the first answer wins; answered in chit,
  the host's call completes and its question is withdrawn;
* ``chit`` — never to the host: only chit's inbox, whose answer completes the call.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from tests.daemon_support import chit, daemon_env
from tests.proxy_support import PYTHON, demo_args, proxy_home, question_waits, show, wait_receipt

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("setting", ["host", "both", "chit"])
def test_the_prompts_setting_decides_who_answers(tmp_path: Path, setting: str) -> None:
    with proxy_home(tmp_path, demo=demo_args(tmp_path / "demo.db")) as home:
        config = home / "config.toml"
        config.write_text(config.read_text() + f'prompts = "{setting}"\n')
        env = daemon_env(home)
        params = StdioServerParameters(
            command=PYTHON, args=["-m", "chit", "proxy", "demo"], env=env
        )
        asked = threading.Event()
        release = threading.Event()
        seen: dict[str, Any] = {}

        async def elicit(
            context: ClientRequestContext, params: ElicitRequestParams
        ) -> ElicitResult:
            seen["message"] = params.message
            asked.set()
            if setting == "both":
                await anyio.sleep_forever()  # chit answers first; this question is withdrawn
            await anyio.to_thread.run_sync(release.wait, 60)
            return ElicitResult(action="accept", content={"confirm": True})

        def person() -> None:
            row = wait_receipt(home, question_waits, server="demo")
            seen["rid"] = row["receipt_id"]
            if setting != "chit":
                assert asked.wait(60), "the host was never asked"
            ran = chit("answer", row["receipt_id"], "--json", '{"confirm": true}', env=env)
            seen["chit"] = ran
            release.set()

        async def host() -> Any:
            async with Client(
                params, mode="legacy", read_timeout_seconds=120, elicitation_callback=elicit
            ) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(anyio.to_thread.run_sync, person)
                    result = await client.call_tool("confirm_delete", {"filename": "x.txt"})
                return result

        result = anyio.run(host)
        assert result.is_error is False and result.content[0].text == "Deleted x.txt"
        ran = seen["chit"]
        if setting == "host":
            assert ran.code != 0 and 'prompts = "host"' in ran.err, ran
            assert len(ran.err.strip().splitlines()) == 1  # one line, no traceback
        else:
            assert ran.code == 0, ran.err
        assert asked.is_set() is (setting != "chit")
        detail = show(home, seen["rid"])
        assert detail["state"] == "completed"
        assert [t["kind"] for t in detail["timeline"]].count("input_answered") == 1
