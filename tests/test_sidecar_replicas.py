"""Several ``chit sidecar --http --store postgresql://…`` replicas on one database.

Tokens added once work on every replica (principals are shared); 500 concurrent
``work_start`` calls with one idempotency key, spread over two replicas, make one item;
executors on both replicas apply every intent exactly once (``FOR UPDATE SKIP LOCKED``).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor
from chit.sidecar.sql import fetch_all
from chit.store import Store
from tests.sidecar_support import (
    OWNER,
    PYTHON,
    call,
    env_for,
    executor,
    make_home,
    start_http,
    stop,
)

pytestmark = [pytest.mark.timeout(240)]


def _chit(home: Home, *args: str) -> str:
    out = subprocess.run(
        [PYTHON, "-m", "chit", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def _client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[tuple[Home, str, list[str]]]:
    """A home, a token added through the shared store, and two replicas' URLs."""
    home = make_home(tmp_path)
    token = _chit(home, "sidecar", "--store", pg_url, "token", "add", "agent")
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for _ in range(2):
            proc, url = start_http(home, "--store", pg_url)
            procs.append(proc)
            urls.append(url)
        yield home, token, urls
    finally:
        for proc in procs:
            stop(proc)


def _rows(url: str, sql: str) -> list[Any]:
    with SidecarStore.open(url) as sc:
        return fetch_all(sc.db, sql)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_500_concurrent_starts_with_one_key_make_one_item(
    replicas: tuple[Home, str, list[str]], pg_url: str
) -> None:
    home, token, urls = replicas
    args = {"task_key": "one", "title": "One", "idempotency_key": "same-key"}
    answers: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(_client(urls[i % 2], token)) for i in range(10)]

        problems: list[str] = []

        async def start(client: Client) -> None:
            try:
                data, is_error = await call(client, "work_start", args)
            except Exception as exc:  # reported below, not buried in a task-group tree
                problems.append(repr(exc))
                return
            if is_error:
                problems.append(repr(data))
            answers.append(data)

        async with anyio.create_task_group() as tg:
            for i in range(500):
                tg.start_soon(start, clients[i % len(clients)])
    assert not problems, (len(problems), problems[:3])
    assert len(answers) == 500
    assert len({a["item_id"] for a in answers}) == 1
    assert sum(not a["replayed"] for a in answers) == 1  # one call made it, 499 replays
    assert len(_rows(pg_url, "SELECT item_id FROM anchors")) == 1
    assert len(_rows(pg_url, "SELECT id FROM intents")) == 1
    # The replicas' executors apply it (once): the record exists in the shared home.
    item = answers[0]["item_id"]
    with anyio.fail_after(60):
        while _rows(pg_url, "SELECT 1 FROM intents WHERE state = 'applied'") == []:
            await anyio.sleep(0.1)
    with Store.open(home) as library:
        assert library.work.get(item) is not None


NOTES = 4


def test_executors_on_both_replicas_apply_each_intent_exactly_once(
    pg_url: str, tmp_path: Path
) -> None:
    """Two executors (as on two replicas) drain one PostgreSQL queue side by side."""
    home = make_home(tmp_path)
    with SidecarStore.open(pg_url) as sc:
        items = []
        for k in range(40):
            item = sc.open_work("local", f"t{k}", f"T{k}", idempotency_key=f"k{k}").item_id
            for i in range(NOTES):
                sc.enqueue("local", item, "note", {"text": f"n{i}"})
            sc.enqueue("local", item, "complete", {"summary": "done"})
            items.append(item)
    applied: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = threading.Event()

    def run(name: str) -> None:
        ex, _ = executor(home, OWNER, sidecar_path=pg_url)
        original = ex.apply

        def counting(intent: Any, owner: str | None) -> Any:
            with lock:
                applied[name] = applied.get(name, 0) + 1
            return original(intent, owner)

        ex.apply = counting  # type: ignore[method-assign]
        try:
            while not stop_at.is_set():
                if ex.run_once(limit=5) == 0 and not _open(pg_url):
                    break
        finally:
            ex.close()

    workers = [threading.Thread(target=run, args=(f"replica-{i}",)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    stop_at.set()
    total = len(items) * (NOTES + 2)
    states = _rows(pg_url, "SELECT state, count(*) FROM intents GROUP BY state")
    assert {r[0]: r[1] for r in states} == {"applied": total}
    assert _rows(pg_url, "SELECT id FROM intents WHERE failure_class IS NOT NULL") == []
    assert sum(applied.values()) == total and all(applied.get(f"replica-{i}") for i in (0, 1))
    with Store.open(home) as library:
        for item in items:
            record = library.work.get(item)
            assert record is not None and record.status == "completed"
            assert [n.text for n in library.work.notes(item)] == [f"n{i}" for i in range(NOTES)]


def _open(url: str) -> bool:
    return bool(_rows(url, "SELECT 1 FROM intents WHERE state IN ('pending', 'retrying')"))


def test_unreachable_sidecar_store_is_one_line(tmp_path: Path) -> None:
    from tests.proc_support import free_port

    home = make_home(tmp_path)
    url = f"postgresql://u:pw@127.0.0.1:{free_port()}/db"
    proc = subprocess.run(
        [PYTHON, "-m", "chit", "sidecar", "--store", url, "--stats"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 5 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("chit: cannot open the sidecar store: ") and ":pw@" not in lines[0]


def test_executor_class_accepts_a_url(pg_url: str, tmp_path: Path) -> None:
    ex = Executor(make_home(tmp_path), executor(make_home(tmp_path / "x"))[1], sidecar_path=pg_url)
    try:
        assert ex.run_once() == 0
    finally:
        ex.close()


def test_outage_is_a_transient_answer_then_the_store_recovers(tmp_path: Path) -> None:
    """The database goes away under a sidecar and comes back: nothing acknowledged is lost."""
    import time

    from chit.sidecar.pgdb import StoreUnreachable
    from chit.sidecar.service import SidecarService
    from tests.pg_support import new_cluster, remove_cluster

    cluster = new_cluster()
    try:
        home = make_home(tmp_path)
        service = SidecarService(home, sidecar_path=cluster.url, check_library=False)
        acked, is_error = service.start("local", {"task_key": "a", "title": "A"})
        assert not is_error
        cluster.stop("fast")
        answer, is_error = service.start("local", {"task_key": "b", "title": "B"})
        assert is_error and answer["failure_class"] == "transient"
        assert answer["reason"].startswith("the sidecar store is unavailable: ")
        assert "nothing was stored" in answer["reason"] and "\n" not in answer["reason"]
        with pytest.raises(StoreUnreachable):
            service.store.anchor(acked["item_id"])
        cluster.start()
        deadline = time.monotonic() + 60
        while True:
            again, is_error = service.start("local", {"task_key": "b", "title": "B"})
            if not is_error or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not is_error, again
        anchor = service.store.anchor(acked["item_id"])
        assert anchor is not None and anchor.task_key == "a"
    finally:
        remove_cluster(cluster)


def test_config_key_selects_the_sidecar_store(pg_url: str, tmp_path: Path) -> None:
    import json

    home = make_home(tmp_path)
    home.config_path.write_text(f'[store]\nsidecar = "{pg_url}"\n')
    _chit(home, "sidecar", "token", "add", "from-config")  # no --store: the config's
    listed = json.loads(_chit(home, "sidecar", "--store", pg_url, "token", "list", "--json"))
    assert [t["name"] for t in listed] == ["from-config"]
    assert not home.sidecar_db_path.exists()  # nothing went to the home's file
    doctor = json.loads(_chit(home, "doctor", "--json"))["stores"]["sidecar"]
    assert doctor["kind"] == "postgresql" and doctor["schema"]["sidecar"] == 1
