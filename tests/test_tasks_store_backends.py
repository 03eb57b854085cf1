"""The task store contract, run against both stores: SQLite and PostgreSQL.

Every conditional write is decided by the database (keyed insert, claim, owner-guarded
update, answer merge), so racing threads — standing in for racing replicas, each with
its own store object and connections — must get exactly one winner.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from chit.tasks.server.backend import StoreUnavailable, TaskBackend, open_task_store
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.schema import OwnerRow

Opener = Callable[[], TaskBackend]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a new store object on one shared database (a "replica" each call)."""
    target = str(tmp_path / "tasks.db")
    if request.param == "postgresql":
        target = request.getfixturevalue("pg_url")
    opened: list[TaskBackend] = []

    def open_one() -> TaskBackend:
        store = open_task_store(target)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def record(task_id: str, **overrides: Any) -> TaskRecord:
    values: dict[str, Any] = {
        "id": task_id,
        "principal": "p",
        "tool": "slow",
        "args": {"n": 1, "text": "é\u0000'"},
        "args_digest": "d",
        "request_key": None,
        "status": "working",
        "status_message": "Queued",
        "created_at_ms": 1000,
        "updated_at_ms": 1000,
        "ttl_ms": 60_000,
        "expires_at_ms": 61_000,
        "poll_interval_ms": 500,
        "protocol": "2026-07-28",
        "owner_id": "o1",
    }
    values.update(overrides)
    return TaskRecord(**values)


def test_round_trip_and_guarded_updates(opener: Opener) -> None:
    store = opener()
    store.insert(record("a", progress_token=7, resumable=True))
    got = store.get("a")
    assert got is not None and got.args == {"n": 1, "text": "é\u0000'"}
    assert got.progress_token == 7 and got.resumable and got.input_requests == {}
    assert store.get("missing") is None
    assert not store.update("a", owner="o2", status_message="not mine")
    assert store.update("a", owner="o1", status_message="mine", durable=False)
    assert store.update("a", status="completed", result={"content": []})
    assert not store.update("a", only_if_active=True, status_message="late")
    final = store.get("a")
    assert final is not None and final.status_message == "mine" and final.result == {"content": []}


def test_claim_has_exactly_one_winner_across_replicas(opener: Opener) -> None:
    stores = [opener() for _ in range(4)]
    stores[0].insert(record("t", owner_id="dead"))
    barrier = threading.Barrier(len(stores) * 4)

    def claim(i: int) -> bool:
        barrier.wait()
        return stores[i % len(stores)].claim("t", "dead", owner_id=f"new{i}")

    with ThreadPoolExecutor(len(stores) * 4) as pool:
        wins = list(pool.map(claim, range(len(stores) * 4)))
    assert wins.count(True) == 1
    owner = stores[0].get("t")
    assert owner is not None and owner.owner_id == f"new{wins.index(True)}"
    stores[0].insert(record("u", owner_id=None))
    assert stores[1].claim("u", None, owner_id="x") and not stores[2].claim("u", None, owner_id="y")


def test_same_request_key_from_many_replicas_makes_one_task(opener: Opener) -> None:
    stores = [opener() for _ in range(3)]
    barrier = threading.Barrier(12)

    def create(i: int) -> str:
        barrier.wait()
        mine = record(f"id{i}", request_key="k")
        existing = stores[i % 3].insert_keyed(mine)
        return mine.id if existing is None else existing.id

    with ThreadPoolExecutor(12) as pool:
        ids = set(pool.map(create, range(12)))
    assert len(ids) == 1
    assert [r.id for r in stores[0].active()] == list(ids)


def test_answers_merge_under_concurrency(opener: Opener) -> None:
    stores = [opener() for _ in range(2)]
    asks = {f"q{i}": {"method": "elicitation/create"} for i in range(10)}
    stores[0].insert(record("t", status="input_required", input_requests=asks))
    barrier = threading.Barrier(10)

    def answer(i: int) -> None:
        barrier.wait()
        stores[i % 2].add_responses("t", {f"q{i}": {"action": "accept"}, "unknown": {}})

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(answer, range(10)))
    got = stores[1].get("t")
    assert got is not None and set(got.input_responses) == set(asks)
    assert stores[0].states(["t", "nope"])["t"].responses == 10
    assert stores[0].add_responses("nope", {}) is None


def test_list_purge_and_expiry(opener: Opener) -> None:
    store = opener()
    for i in range(5):
        store.insert(record(f"t{i}", created_at_ms=1000 + i // 2, expires_at_ms=5000))
    store.insert(record("other", principal="q", expires_at_ms=5000))
    store.insert(record("keyed", request_key="k", expires_at_ms=10))
    store.insert(record("old", expires_at_ms=10))
    page = store.list_for("p", 100, None, 3)
    assert [r.id for r in page] == ["t0", "t1", "t2"]
    rest = store.list_for("p", 100, (page[-1].created_at_ms, page[-1].id), 10)
    assert [r.id for r in rest] == ["t3", "t4"]
    assert store.purge_expired(100) == 1
    assert store.get("old") is None and store.get("keyed") is not None


def test_owners_heartbeat_and_release(opener: Opener) -> None:
    store = opener()
    store.heartbeat(OwnerRow("o1", 10, "h", 1, 2))
    store.heartbeat(OwnerRow("o1", 10, "h", 1, 9))
    store.heartbeat(OwnerRow("o2", 11, "h", 1, 3))
    assert store.owners()["o1"].heartbeat_at_ms == 9
    store.insert(record("plain", owner_id="o1"))
    store.insert(record("again", owner_id="o1", resumable=True))
    store.remove_owners(["o1", "o2"])  # o1 still holds active tasks
    assert set(store.owners()) == {"o1"}
    store.release("o1", {"status": "failed", "error": {"code": -32603, "message": "x"}})
    plain, again = store.get("plain"), store.get("again")
    assert plain is not None and plain.status == "failed" and plain.error is not None
    assert again is not None and again.status == "working" and again.owner_id is None
    assert store.owners() == {}


def test_postgres_pushes_other_replicas_changes(request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url")
    a, b = open_task_store(url), open_task_store(url)
    assert a.pushes_changes and a.kind == "postgresql"
    seen: list[tuple[str | None, str | None]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.follow, lambda t, s: seen.append((t, s)))
            with anyio.fail_after(10):
                while not seen:  # the (None, None) "re-read everything" after connecting
                    await anyio.sleep(0.01)
                a.insert(record("mine"))  # a's own writes are not reported back to it
                b.insert(record("theirs"))
                b.update("theirs", status_message="msg")
                b.update("theirs", status="completed")
                while len(seen) < 4:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        a.close()
        b.close()
    assert seen == [(None, None), ("theirs", "working"), ("theirs", None), ("theirs", "completed")]


def test_postgres_unreachable_is_one_line(request: pytest.FixtureRequest) -> None:
    from tests.proc_support import free_port

    url = f"postgresql://u:s3cret@127.0.0.1:{free_port()}/db?pool_size=2"
    with pytest.raises(StoreUnavailable) as caught:
        open_task_store(url, connect_timeout_s=2)
    message = caught.value.message
    assert message.startswith("Task store unavailable: ") and "\n" not in message
    assert "s3cret" not in message
    from chit.tasks.server.pgstore import redact

    assert redact(url) == url.replace("s3cret", "***")


def test_postgres_replicas_migrate_once_and_refuse_newer(request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url")
    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: open_task_store(url), range(4)))
    for store in stores:
        store.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT version FROM chit_schema WHERE component = 'tasks'").fetchone()
        assert row is not None and row[0] == 1
        conn.execute("UPDATE chit_schema SET version = 99 WHERE component = 'tasks'")
    with pytest.raises(RuntimeError, match="newer than this chit"):
        open_task_store(url)


def test_postgres_pool_is_bounded(request: pytest.FixtureRequest) -> None:
    import psycopg

    url = request.getfixturevalue("pg_url")
    store = open_task_store(url + "?pool_size=2")
    try:
        store.insert(record("t"))
        with ThreadPoolExecutor(12) as pool:
            found = list(pool.map(lambda _: store.get("t"), range(120)))
        assert all(r is not None and r.id == "t" for r in found)
        origin = store.origin  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (origin,)
            ).fetchone()
        assert row is not None and 1 <= row[0] <= 2
    finally:
        store.close()
