"""The receipt repository: writes, reads, pagination, optimistic concurrency, data boundary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from chit.errors import Conflict, UsageError
from chit.home import Home
from chit.receipts import IntentState, LifecycleState, ObservationSource
from chit.store import (
    AlreadyExists,
    AmbiguousPrefix,
    RecordNotFound,
    StaleWrite,
    Store,
    immediate,
)
from chit.store.receipt_pages import _by_states
from tests.store_support import T0, make_intent, make_obs, make_receipt, sealed

BLOB, FP = b"\x01sealed-bytes", "fp0123456789"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(Home(tmp_path / "home")) as opened:
        yield opened


def test_insert_get_and_handle(store: Store) -> None:
    receipt = make_receipt("r-1")
    store.receipts.insert(receipt, BLOB, FP, [make_obs("r-1", source=ObservationSource.CREATE)])
    assert store.receipts.get("r-1") == receipt
    assert store.receipts.require("r-1") == receipt
    assert store.receipts.by_request_key("rk-r-1") == receipt
    assert store.receipts.handle_blob("r-1") == BLOB
    assert len(store.observations.timeline("r-1")) == 1
    assert store.receipts.get("nope") is None
    with pytest.raises(RecordNotFound):
        store.receipts.require("nope")
    with pytest.raises(RecordNotFound):
        store.receipts.handle_blob("nope")
    with pytest.raises(AlreadyExists):
        store.receipts.insert(receipt, BLOB, FP)
    with pytest.raises(AlreadyExists, match="request key"):
        store.receipts.insert(make_receipt("r-2", request_key="rk-r-1"), BLOB, FP)


def test_insert_refuses_plaintext_and_mismatched_fingerprint(store: Store) -> None:
    with pytest.raises(TypeError, match="sealed"):
        store.receipts.insert(make_receipt("r-1"), "task-123", FP)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fingerprint"):
        store.receipts.insert(make_receipt("r-1"), BLOB, "other")
    with pytest.raises(ValueError, match="together"):
        store.receipts.insert(make_receipt("r-1"), BLOB, None)
    store.receipts.insert(make_receipt("r-sync", fingerprint=None), None, None)
    assert store.receipts.handle_blob("r-sync") is None


def test_record_acceptance(store: Store) -> None:
    intent = store.intents.begin(make_intent("rk-r-1"))
    receipt = make_receipt("r-1")
    store.receipts.record_acceptance(intent, receipt, make_obs("r-1"), BLOB, FP)
    stored_intent = store.intents.get("rk-r-1")
    assert stored_intent is not None
    assert stored_intent.state is IntentState.ACCEPTED
    assert stored_intent.receipt_id == "r-1"
    assert store.receipts.get("r-1") == receipt
    assert [o.status for o in store.observations.timeline("r-1")] == [LifecycleState.WORKING]
    with pytest.raises(AlreadyExists):
        store.receipts.record_acceptance(
            intent, make_receipt("r-9", request_key="rk-r-1"), make_obs("r-9"), BLOB, FP
        )
    with pytest.raises(ValueError):
        store.receipts.record_acceptance(intent, make_receipt("r-3"), make_obs("r-3"), BLOB, FP)


def test_update_optimistic_concurrency(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with Store.open(home) as a, Store.open(home) as b:
        a.receipts.insert(make_receipt("r-1"), BLOB, FP)
        seen_a, seen_b = a.receipts.require("r-1"), b.receipts.require("r-1")
        msg_a = seen_a.model_copy(update={"status_message": "from a", "version": 2})
        assert a.receipts.update(msg_a, [make_obs("r-1", message="a")], 1).version == 2
        msg_b = seen_b.model_copy(update={"status_message": "from b", "version": 2})
        with pytest.raises(StaleWrite) as info:
            b.receipts.update(msg_b, [make_obs("r-1", message="b")], seen_b.version)
        assert info.value.transient
        # the losing write left nothing behind, not even its observation
        assert [o.message for o in b.observations.timeline("r-1")] == ["a"]
        fresh = b.receipts.require("r-1")
        retry = fresh.model_copy(update={"status_message": "from b"})
        stored = b.receipts.update(retry, [make_obs("r-1", message="b")], fresh.version)
        assert stored.version == 3
        assert a.receipts.require("r-1") == stored
        assert [o.message for o in a.observations.timeline("r-1")] == ["a", "b"]


def test_update_rules(store: Store) -> None:
    with pytest.raises(RecordNotFound):
        store.receipts.update(make_receipt("ghost"), [], 1)
    store.receipts.insert(make_receipt("r-1"), BLOB, FP)
    done = make_receipt("r-1", state=LifecycleState.COMPLETED)
    assert store.receipts.update(done, [], 1).state is LifecycleState.COMPLETED
    again = done.model_copy(update={"state": LifecycleState.FAILED})
    with pytest.raises(Conflict, match="terminal"):
        store.receipts.update(again, [], 2)
    with pytest.raises(Conflict, match="request key"):
        store.receipts.update(done.model_copy(update={"request_key": "other"}), [], 2)
    wiped = done.model_copy(update={"handle": None})
    store.receipts.update(wiped, [], 2, wipe_handle=True)
    assert store.receipts.handle_blob("r-1") is None
    assert store.receipts.delete("r-1")
    assert store.observations.count() == 0
    assert not store.receipts.delete("r-1")


def test_get_by_prefix(store: Store) -> None:
    for rid in ("01HZAAA1", "01HZAAA2", "01HZBBB1"):
        store.receipts.insert(make_receipt(rid), BLOB, FP)
    assert store.receipts.get_by_prefix("01HZB").receipt_id == "01HZBBB1"
    assert store.receipts.get_by_prefix("01HZAAA2").receipt_id == "01HZAAA2"
    with pytest.raises(AmbiguousPrefix):
        store.receipts.get_by_prefix("01HZA")
    with pytest.raises(RecordNotFound):
        store.receipts.get_by_prefix("zz")
    with pytest.raises(RecordNotFound):
        store.receipts.get_by_prefix(" ")


def _fill(store: Store, n: int) -> None:
    states = list(LifecycleState)
    with immediate(store.db):  # one outer transaction: the repository writes nest
        for i in range(n):
            store.receipts.insert(
                make_receipt(
                    f"r{i:05d}",
                    state=states[i % len(states)],
                    server=f"srv{i % 3}",
                    work_ref=f"w{i % 7}",
                    purpose="needle" if i % 100 == 0 else "hay",
                    # every 10 share a status time: ties are broken by receipt id
                    status_at=T0 + timedelta(seconds=i // 10),
                    next_check_at=T0 + timedelta(seconds=i),
                ),
                BLOB,
                FP,
            )


def _all_pages(store: Store, **filters: object) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = store.receipts.list(limit=50, after=cursor, **filters)  # type: ignore[arg-type]
        assert len(page) <= 50
        ids += [r.receipt_id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return ids


def test_pagination_over_thousands(store: Store) -> None:
    n = 3000
    _fill(store, n)
    ids = _all_pages(store)
    assert len(ids) == n and len(set(ids)) == n
    expected = sorted(
        (f"r{i:05d}" for i in range(n)), key=lambda rid: (int(rid[1:]) // 10, rid), reverse=True
    )
    assert ids == expected
    working = _all_pages(store, state=LifecycleState.WORKING)
    assert len(working) == n // 5
    assert all(store.receipts.require(r).state is LifecycleState.WORKING for r in working[:20])
    assert len(_all_pages(store, server="srv1")) == n // 3
    assert len(_all_pages(store, work_ref="w3")) == len([i for i in range(n) if i % 7 == 3])
    assert len(_all_pages(store, text="NEEDLE")) == n // 100
    both = [LifecycleState.COMPLETED, LifecycleState.FAILED]
    assert len(_all_pages(store, state=both, server="srv0")) == len(
        [i for i in range(n) if i % 5 in (2, 3) and i % 3 == 0]
    )
    assert store.receipts.list(text="100%").items == []  # LIKE wildcards are literal
    with pytest.raises(UsageError):
        store.receipts.list(after="not-a-cursor")
    counts = store.receipts.counts_by_state()
    assert counts == dict.fromkeys(LifecycleState, n // 5)
    assert store.receipts.count() == n


def test_list_uses_indexes(store: Store) -> None:
    """A page of one ended state is a range of ``receipts_ended`` in page order (no sort);
    tests/test_store_listing_trees.py checks every listing query's plan."""
    sql, args = _by_states(["completed"], ["(status_at, receipt_id) < (?, ?)"], ["x", "y"], 51)
    plan = " ".join(str(r[3]) for r in store.db.conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))
    assert "receipts_ended" in plan and "TEMP B-TREE" not in plan


def test_due_and_non_terminal(store: Store) -> None:
    _fill(store, 100)
    store.receipts.insert(make_receipt("unscheduled"), BLOB, FP)
    now = T0 + timedelta(seconds=50)
    due = store.receipts.due(now, limit=100)
    assert due[0].receipt_id == "unscheduled"  # never scheduled = due at once
    assert all(not r.is_terminal for r in due)
    assert {r.receipt_id for r in due[1:]} == {f"r{i:05d}" for i in range(51) if i % 5 in (0, 1)}
    assert len(store.receipts.due(now, limit=3)) == 3
    non_terminal = store.receipts.non_terminal()
    assert len(non_terminal) == 41 and all(not r.is_terminal for r in non_terminal)


def test_sealed_handle_never_in_file_bytes(tmp_path: Path) -> None:
    """Data boundary (§4.18): only the ciphertext reaches the .db and -wal files."""
    home = Home(tmp_path / "home")
    plaintext = "task-5f1d3c9e-PLAINTEXT-HANDLE-7b2a"
    with Store.open(home) as store:
        blob, fp = sealed(plaintext, json.dumps(["r-1", "demo", None]).encode())
        assert plaintext.encode() not in blob
        intent = store.intents.begin(make_intent("rk-r-1"))
        receipt = make_receipt("r-1", fingerprint=fp)
        store.receipts.record_acceptance(intent, receipt, make_obs("r-1"), blob, fp)
        assert store.receipts.handle_blob("r-1") == blob
        wal = Path(str(home.db_path) + "-wal")
        for path in (home.db_path, wal):
            data = path.read_bytes()
            assert plaintext.encode() not in data
            assert plaintext.encode("utf-16-le") not in data
        assert blob in wal.read_bytes()  # the ciphertext really went to disk
        store.checkpoint()
    assert plaintext.encode() not in home.db_path.read_bytes()
