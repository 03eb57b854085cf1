"""Several ``chit demo-server --http --store postgresql://…`` replicas on one database.

Any replica answers for any task; the one that created a task runs it under a heartbeat
lease; a SIGKILLed replica's tasks are failed (or resumed, when resumable) by a survivor;
the same request key sent to both replicas at once makes one task that runs once.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import ElicitResult

from tests.proc_support import start_chit_http
from tests.tasks_server_support import PYTHON, create, demo_env, make_client, poll, raw, stop

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]
KEY = "io.github.chit/request-key"
# Each round starts a replica process and kills it (~8 s of a loaded 2-core machine): CI
# runs 4, CHIT_NIGHTLY=1 20, CHIT_REPLICA_KILL_ROUNDS sets it.
KILL_ROUNDS = int(
    os.environ.get("CHIT_REPLICA_KILL_ROUNDS", "20" if os.environ.get("CHIT_NIGHTLY") else "4")
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Replicas:
    """Replica processes on one PostgreSQL database (stopped at the end of the test)."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> tuple[subprocess.Popen[bytes], str]:
        proc, endpoint = start_chit_http(
            ["demo-server", "--store", self.url],
            env=demo_env(self.tmp),
            log_dir=self.tmp,
            log_name="replica",
            what="demo replica",
            python=PYTHON,
        )
        self.procs.append(proc)
        return proc, endpoint

    def stop_all(self) -> None:
        for proc in self.procs:
            stop(proc)


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[Replicas]:
    group = Replicas(pg_url, tmp_path)
    try:
        yield group
    finally:
        group.stop_all()


def db_row(url: str, task_id: str) -> dict[str, Any]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute("SELECT * FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return dict(row)


async def wait_row(url: str, task_id: str, check: Any, timeout: float = 20) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while not check(row := db_row(url, task_id)):
            await anyio.sleep(0.05)
    return row


async def answer_confirm(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def test_2026_client_alternating_replicas(replicas: Replicas) -> None:
    _, url_a = replicas.start()
    _, url_b = replicas.start()
    async with make_client(url_a, "2026") as a, make_client(url_b, "2026") as b:
        turn = [a, b]

        def nxt() -> Any:
            turn.reverse()
            return turn[0]

        task = await create(nxt(), "2026", "confirm_delete", {"filename": "x.txt"})
        task_id = task["taskId"]
        with anyio.fail_after(20):
            while (got := await raw(nxt(), "tasks/get", {"taskId": task_id}))[
                "status"
            ] != "input_required":
                await anyio.sleep(0.05)
        (key,) = got["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        await raw(nxt(), "tasks/update", {"taskId": task_id, "inputResponses": answer})
        with anyio.fail_after(20):
            while (got := await raw(nxt(), "tasks/get", {"taskId": task_id}))["status"] != (
                "completed"
            ):
                await anyio.sleep(0.05)
        assert "x.txt" in got["result"]["content"][0]["text"]

        slow = await create(nxt(), "2026", "slow_compute", {"seconds": 60, "label": "c"})
        await raw(nxt(), "tasks/cancel", {"taskId": slow["taskId"]})
        assert (await raw(nxt(), "tasks/get", {"taskId": slow["taskId"]}))["status"] == "cancelled"
        # The owning replica heard of the cancel and stopped its worker (which counts a run).
        row = await wait_row(replicas.url, slow["taskId"], lambda r: r["runs"] == 1)
        assert row["status"] == "cancelled" and row["result_json"] is None


async def test_2025_client_alternating_replicas(replicas: Replicas) -> None:
    _, url_a = replicas.start()
    _, url_b = replicas.start()
    async with (
        make_client(url_a, "2025", elicitation_callback=answer_confirm) as a,
        make_client(url_b, "2025", elicitation_callback=answer_confirm) as b,
    ):
        task = await create(a, "2025", "confirm_delete", {"filename": "y.txt"})
        task_id = task["taskId"]
        await poll(b, task_id, until={"input_required"})
        # tasks/result on the replica that does not run the task: the elicitation goes out
        # on B's stream, the answer lands in the row, A's worker wakes (LISTEN/NOTIFY).
        result = await raw(b, "tasks/result", {"taskId": task_id})
        assert "y.txt" in result["content"][0]["text"]
        assert (await raw(a, "tasks/get", {"taskId": task_id}))["status"] == "completed"
        listed = await raw(b, "tasks/list", {})
        assert task_id in [t["taskId"] for t in listed["tasks"]]

        slow = await create(b, "2025", "slow_compute", {"seconds": 60, "label": "c"})
        cancelled = await raw(a, "tasks/cancel", {"taskId": slow["taskId"]})
        assert cancelled["status"] == "cancelled"
        assert (await raw(b, "tasks/get", {"taskId": slow["taskId"]}))["status"] == "cancelled"
        row = await wait_row(replicas.url, slow["taskId"], lambda r: r["runs"] == 1)
        assert row["status"] == "cancelled"


@pytest.mark.parametrize("gen", ["2025", "2026"])
async def test_same_request_key_to_both_replicas_at_once(replicas: Replicas, gen: str) -> None:
    _, url_a = replicas.start()
    _, url_b = replicas.start()
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(make_client(url, gen))
            for url in (url_a, url_b, url_a, url_b, url_a, url_b)
        ]
        ids: list[str] = []

        async def send(client: Any) -> None:
            task = await create(
                client, gen, "slow_compute", {"seconds": 0.5, "label": "k"}, **{KEY: "same"}
            )
            ids.append(task["taskId"])

        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(send, client)
        assert len(set(ids)) == 1 and len(ids) == len(clients)
        done = await poll(clients[1], ids[0])
        assert done["status"] == "completed"
    row = await wait_row(replicas.url, ids[0], lambda r: r["runs"] >= 1)
    assert row["runs"] == 1  # one execution, wherever it ran


async def test_sigkilled_replica_tasks_fail_or_resume(replicas: Replicas) -> None:
    """SIGKILL the replica running the tasks, round after round: nothing lost or doubled."""
    _, survivor_url = replicas.start()
    created: list[tuple[str, str]] = []  # (task id, kind)
    async with make_client(survivor_url, "2026") as survivor:
        for round_no in range(KILL_ROUNDS):
            victim, victim_url = replicas.start()
            async with make_client(victim_url, "2026") as v:
                plain = await create(
                    v, "2026", "slow_compute", {"seconds": 60, "label": "k"},
                    **{KEY: f"plain-{round_no}"},
                )  # fmt: skip
                again = await create(v, "2026", "resumable_job", {"seconds": 0.3})
                await poll(v, again["taskId"], until={"working"})
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            created += [(plain["taskId"], "plain"), (again["taskId"], "resumable")]
            failed = await poll(survivor, plain["taskId"], timeout=30)
            assert failed["status"] == "failed" and failed["error"]["code"] == -32603
            resumed = await poll(survivor, again["taskId"], timeout=30)
            assert resumed["status"] == "completed", resumed
            # A keyed retry after the crash finds the same (failed) task: never a second run.
            retry = await create(
                survivor, "2026", "slow_compute", {"seconds": 60, "label": "k"},
                **{KEY: f"plain-{round_no}"},
            )  # fmt: skip
            assert retry["taskId"] == plain["taskId"] and retry["status"] == "failed"
        for task_id, kind in created:
            row = db_row(replicas.url, task_id)
            if kind == "plain":
                assert row["status"] == "failed" and row["result_json"] is None
            else:
                assert row["status"] == "completed" and row["runs"] == 1
